//! CONTRACT section 10, over ACP: a `kind = "acp"` entry runs an agent program per run and
//! speaks the Agent Client Protocol to it. The agent here is written with the official Python
//! SDK (`tests/fixtures/acp_agent.py`), so the wire is the SDK's, not ours.

use std::path::PathBuf;

use seam_host::{Event, Host, StopReason, SubagentResult};
use seam_tests::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The fixture agent's script.
pub fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/acp_agent.py")
}

/// An ACP entry running the fixture; `tag` is an extra argument the fixture ignores, which
/// marks this test's processes in /proc.
pub fn acp_entry(id: &str, tag: &str, config: &str, grants: &str) -> String {
    format!(
        "[[plugin]]\nid = \"{id}\"\nkind = \"acp\"\ncommand = [\"{}\", \"{}\", \"{tag}\"]\n\
         config = {{ {config} }}\n{grants}\n",
        seam_tests::acp_python().display(),
        fixture().display()
    )
}

/// Processes whose command line holds `tag`.
pub fn processes_tagged(tag: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == tag.as_bytes()))
        })
        .collect()
}

/// No process of `tag` is left and the host counts none. Unloads the host: `unload_all`
/// returns once every process its providers started has been reaped, so /proc shows none of
/// them at once (no polling).
/// No agent process is left: the host counts none, and once it has unloaded every plugin (which
/// returns only when every agent is reaped) none with `tag` is in /proc. The host serves
/// nothing after it.
pub async fn assert_no_agent_left(host: &Host, tag: &str) {
    assert_eq!(
        host.live_processes(),
        0,
        "the host still counts agent processes"
    );
    host.unload_all().await;
    assert_eq!(
        processes_tagged(tag),
        Vec::<u32>::new(),
        "agent processes left"
    );
}

/// A barrier: the agent has sent its first chunk (a run's first progress event).
async fn first_chunk(events: &mut tokio::sync::watch::Receiver<Vec<Event>>) {
    wait_for(events, "the agent's first chunk", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::SubagentProgress { .. }))
    })
    .await;
}

async fn run(host: &Host, provider: &str, prompt: &str) -> SubagentResult {
    let run = host.subagents().start(provider, request(prompt)).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    result
}

#[tokio::test]
async fn an_acp_agent_answers_and_its_process_is_reaped() {
    let tag = "acp-echo";
    let host = host_with(&acp_entry("agent", tag, "name = \"helper\"", "")).await;
    let d = host
        .subagents()
        .descriptor("helper")
        .expect("registered by its config name");
    assert!(!d.inherits_parent_context);
    assert!(d.capabilities.persona);
    assert!(!d.capabilities.output_schema);
    let result = run(&host, "helper", "echo hello from python").await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(words(&result), "hello from python");
    assert_no_agent_left(&host, tag).await;
}

#[tokio::test]
async fn chunks_stream_as_progress_and_join_into_the_answer() {
    let host = host_with(&acp_entry("agent", "acp-stream", "", "")).await;
    let seen = record(&host);
    let result = run(&host, "agent", "stream 4").await;
    assert_eq!(words(&result), "part0 part1 part2 part3 ");
    let progress: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentProgress { content, .. } => Some(seam_host::blocks_text(content)),
            _ => None,
        })
        .collect();
    assert_eq!(progress, ["part0 ", "part1 ", "part2 ", "part3 "]);
    // Every update falls between start and end.
    let names = names(&seen);
    let start = names.iter().position(|n| *n == "subagent/start").unwrap();
    let end = names.iter().position(|n| *n == "subagent/end").unwrap();
    assert!(names
        .iter()
        .enumerate()
        .all(|(i, n)| *n != "subagent/progress" || (start < i && i < end)));
}

#[tokio::test]
async fn stop_reasons_map_onto_seams() {
    let host = host_with(&acp_entry("agent", "acp-stops", "", "")).await;
    for (wire, expected) in [
        ("end_turn", StopReason::Completed),
        ("max_tokens", StopReason::MaxTokens),
        ("refusal", StopReason::Refusal),
        ("cancelled", StopReason::Aborted),
        (
            "max_turn_requests",
            StopReason::Other("max-turn-requests".into()),
        ),
    ] {
        let result = run(&host, "agent", &format!("stop {wire}")).await;
        assert_eq!(result.stop_reason, expected, "{wire}: {result:?}");
    }
}

#[tokio::test]
async fn the_persona_and_system_prompt_come_first() {
    let host = host_with(&acp_entry("agent", "acp-persona", "", "")).await;
    let mut r = request("blocks");
    r.persona = Some("You are terse.".into());
    r.agent_options = Some(seam_host::AgentOptions {
        model: None,
        system_prompt: Some("System.".into()),
    });
    let run = host.subagents().start("agent", r).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(words(&result), "System. | You are terse. | blocks");
}

#[tokio::test]
async fn permission_requests_follow_the_entry_policy() {
    let cases = [
        ("reject", "read", "no"),
        ("reject", "edit", "no"),
        ("allow-read", "read", "yes"),
        ("allow-read", "search", "yes"),
        ("allow-read", "execute", "no"),
        ("allow", "execute", "yes"),
    ];
    for (policy, kind, expected) in cases {
        let host = host_with(&acp_entry(
            "agent",
            "acp-permission",
            &format!("permissions = \"{policy}\""),
            "",
        ))
        .await;
        let seen = record(&host);
        let result = run(&host, "agent", &format!("permission {kind}")).await;
        assert_eq!(words(&result), expected, "{policy} / {kind}");
        // The tool call the agent announced is reported as progress.
        let progress = seen.lock().unwrap().iter().any(|e| {
            matches!(e, Event::SubagentProgress { content, .. }
                if seam_host::blocks_text(content) == "tool call: touch a file")
        });
        assert!(progress, "{policy} / {kind}");
    }
    // The default is to reject.
    let host = host_with(&acp_entry("agent", "acp-permission", "", "")).await;
    assert_eq!(words(&run(&host, "agent", "permission read").await), "no");
}

#[tokio::test]
async fn the_agent_sees_only_granted_variables_and_the_parents_directory() {
    let tag = "acp-env";
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(&acp_entry(
        "agent",
        tag,
        "",
        "[plugin.grants]\nenv = [\"HOME\"]",
    ))
    .await;
    let parent = seam_host::ParentRef::top_level("p", dir.path().to_string_lossy());
    let run = host
        .subagents()
        .start("agent", seam_host::StartRequest::new("env", parent))
        .unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    let answer = words(&result);
    let (names, cwd) = answer.split_once(';').unwrap();
    let names: Vec<&str> = names.split(',').collect();
    assert!(names.contains(&"HOME"), "{answer}");
    // Python may set LC_CTYPE itself (locale coercion); nothing else of the host's comes in.
    assert!(
        names.iter().all(|n| ["HOME", "LC_CTYPE"].contains(n)),
        "{answer}"
    );
    assert_eq!(
        std::fs::canonicalize(cwd).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap()
    );
    assert_no_agent_left(&host, tag).await;
}

#[tokio::test]
async fn a_cancel_reaches_the_agent_as_session_cancel() {
    let tag = "acp-cancel";
    let host = patient_host_with(&acp_entry("agent", tag, "", "")).await;
    let mut events = watch_events(&host);
    let run = host.subagents().start("agent", request("wait")).unwrap();
    first_chunk(&mut events).await;
    run.cancel(Some("enough".into()));
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted, "{result:?}");
    // Cooperative, not enforced: the agent saw session/cancel and answered `cancelled` itself
    // (its own words are kept); an enforced cancel says so and keeps nothing of the agent's.
    assert_eq!(result.output_text(), "waiting", "{result:?}");
    assert_eq!(
        result.diagnostic.as_deref(),
        Some("cancelled: enough"),
        "{result:?}"
    );
    run.dispose().await;
    assert_no_agent_left(&host, tag).await;
}

#[tokio::test]
async fn an_agent_that_ignores_cancel_and_sigterm_is_killed_and_reaped() {
    let tag = "acp-stubborn";
    let host = host_with(&acp_entry("agent", tag, "", "")).await;
    let mut events = watch_events(&host);
    let run = host
        .subagents()
        .start("agent", request("ignore-cancel"))
        .unwrap();
    first_chunk(&mut events).await;
    assert_eq!(processes_tagged(tag).len(), 1);
    assert_eq!(host.live_processes(), 1, "a live agent counts");
    run.cancel(None);
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted, "{result:?}");
    run.dispose().await;
    // Closing stdin and SIGTERM are ignored; SIGKILL is not. `unload_all` is the barrier: it
    // returns once every process of the host's providers has been reaped.
    host.unload_all().await;
    assert_no_agent_left(&host, tag).await;
}

#[tokio::test]
async fn broken_agents_end_the_run_with_a_diagnostic() {
    let host = host_with(
        &(acp_entry("agent", "acp-broken", "", "")
            + "[[plugin]]\nid = \"missing\"\nkind = \"acp\"\n\
               command = [\"seam-no-such-acp-agent\"]\n"),
    )
    .await;
    let cases = [
        (
            "agent",
            "exit",
            vec!["exited", "exit status: 3", "fixture: exiting in the middle"],
        ),
        ("agent", "garbage", vec!["not ACP", "this is not json-rpc"]),
        (
            "missing",
            "hello",
            vec!["`seam-no-such-acp-agent` is not on PATH"],
        ),
    ];
    for (provider, prompt, needles) in cases {
        let result = run(&host, provider, prompt).await;
        assert_eq!(
            result.stop_reason,
            StopReason::Error,
            "{prompt}: {result:?}"
        );
        let diagnostic = result.diagnostic.clone().unwrap_or_default();
        assert!(
            diagnostic.contains(&format!("ACP agent `{provider}`")),
            "{diagnostic}"
        );
        for needle in needles {
            assert!(diagnostic.contains(needle), "{prompt}: {diagnostic}");
        }
    }
    assert_no_agent_left(&host, "acp-broken").await;
}

#[tokio::test]
async fn concurrent_runs_each_get_a_process() {
    let tag = "acp-concurrent";
    let host = host_with(&acp_entry("agent", tag, "", "")).await;
    let runs: Vec<_> = (0..4)
        .map(|i| {
            host.subagents()
                .start("agent", request(&format!("echo run {i}")))
                .unwrap()
        })
        .collect();
    for (i, run) in runs.iter().enumerate() {
        let result = run.result().await.unwrap();
        assert_eq!(words(&result), format!("run {i}"));
    }
    for run in runs {
        run.dispose().await;
    }
    assert_no_agent_left(&host, tag).await;
}

#[tokio::test]
async fn the_subagent_tool_binds_to_an_acp_provider() {
    let host = host_with(
        &(acp_entry("agent", "acp-tool", "", "")
            + &entry(
                "ask",
                "subagent_tool",
                "provider = \"agent\", toolName = \"ask_agent\"",
            )),
    )
    .await;
    let r = host
        .call_tool(
            "ask_agent",
            seam_host::ParentRef::top_level("p", "/w"),
            &json!({"description": "d", "prompt": "echo through the tool"}).to_string(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text());
    assert_eq!(r.text(), "through the tool");
}

#[tokio::test]
async fn acp_entries_are_checked_at_load() {
    let host = test_host();
    let cases = [
        (
            "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = [\"x\"]\nconfig = { colour = \"red\" }\n",
            "unknown field `colour`",
        ),
        (
            "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = [\"x\"]\nconfig = { permissions = \"sometimes\" }\n",
            "unknown variant `sometimes`",
        ),
        (
            "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = [\"x\"]\n[plugin.grants]\nnetwork = [\"127.0.0.1:80\"]\n",
            "grants.network",
        ),
    ];
    for (toml, needle) in cases {
        let report = host.load(&config(toml)).await;
        assert!(!report.is_ok(), "{toml}");
        let failures = report.failures();
        assert!(report.failed.iter().all(|e| e.id() == "a"), "{failures}");
        assert!(failures.contains(needle), "{failures}");
        assert!(host.subagents().descriptor("a").is_none());
    }
}

#[tokio::test]
async fn file_requests_reach_only_granted_directories() {
    let dir = tempfile::tempdir().unwrap();
    let (open, shut) = (dir.path().join("open"), dir.path().join("shut"));
    std::fs::create_dir_all(&open).unwrap();
    std::fs::create_dir_all(&shut).unwrap();
    std::fs::write(open.join("notes.txt"), "one\ntwo\n").unwrap();
    std::fs::write(shut.join("secret.txt"), "hidden").unwrap();
    std::fs::write(dir.path().join("outside.txt"), "outside").unwrap();
    // A link inside the granted directory that points out of it.
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), open.join("link.txt")).unwrap();
    let grants = format!(
        "[plugin.grants]\ndirs = [{{ host = \"{}\", guest = \"/open\", write = true }}, \
         {{ host = \"{}\", guest = \"/shut\" }}]",
        open.display(),
        shut.display()
    );
    let host = host_with(
        &(acp_entry("files", "acp-files", "", &grants) + &acp_entry("bare", "acp-files", "", "")),
    )
    .await;
    let ask = |provider: &'static str, prompt: String| {
        let host = host.clone();
        async move { words(&run(&host, provider, &prompt).await) }
    };
    let p = |path: &std::path::Path| path.display().to_string();
    assert_eq!(ask("files", "caps".into()).await, "read=True write=True");
    assert_eq!(
        ask("files", format!("read {}", p(&open.join("notes.txt")))).await,
        "read: one\ntwo\n"
    );
    assert_eq!(
        ask("files", format!("read {}", p(&shut.join("secret.txt")))).await,
        "read: hidden"
    );
    assert_eq!(
        ask("files", format!("write {} hello", p(&open.join("new.txt")))).await,
        "written"
    );
    assert_eq!(
        std::fs::read_to_string(open.join("new.txt")).unwrap(),
        "hello"
    );
    let refused = [
        (
            format!("read {}", p(&dir.path().join("outside.txt"))),
            "outside the directories granted",
        ),
        (
            format!("read {}", p(&open.join("link.txt"))),
            "outside the directories granted",
        ),
        (
            format!("write {} x", p(&shut.join("secret.txt"))),
            "granted read-only",
        ),
        ("read relative.txt".to_string(), "not an absolute path"),
        ("terminal".to_string(), "no terminal"),
    ];
    for (prompt, needle) in refused {
        let answer = ask("files", prompt.clone()).await;
        assert!(
            answer.starts_with("error: ") && answer.contains(needle),
            "{prompt}: {answer}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(shut.join("secret.txt")).unwrap(),
        "hidden"
    );
    // Without a `dirs` grant the agent is told it has no file system, and asking fails.
    assert_eq!(ask("bare", "caps".into()).await, "read=False write=False");
    let answer = ask("bare", format!("read {}", p(&open.join("notes.txt")))).await;
    assert!(answer.contains("granted no directory"), "{answer}");
}

/// The agent written with the official Rust crate's agent side (`make fixtures` builds it).
fn rust_agent() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/rust-acp-agent/debug/rust-acp-agent");
    assert!(
        path.is_file(),
        "{} is missing: run `make fixtures` (it builds tests/fixtures/rust-acp-agent)",
        path.display()
    );
    path
}

#[tokio::test]
async fn an_agent_built_on_the_rust_crate_answers_streams_stops_and_cancels() {
    let host = patient_host_with(&format!(
        "[[plugin]]\nid = \"rusty\"\nkind = \"acp\"\ncommand = [\"{}\"]\n",
        rust_agent().display()
    ))
    .await;
    let result = run(&host, "rusty", "echo from rust").await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(words(&result), "from rust");
    assert_eq!(
        words(&run(&host, "rusty", "stream 3").await),
        "part0 part1 part2 "
    );
    for (wire, expected) in [
        ("max_tokens", StopReason::MaxTokens),
        ("refusal", StopReason::Refusal),
    ] {
        assert_eq!(
            run(&host, "rusty", &format!("stop {wire}"))
                .await
                .stop_reason,
            expected
        );
    }
    let mut events = watch_events(&host);
    let waiting = host.subagents().start("rusty", request("wait")).unwrap();
    first_chunk(&mut events).await;
    waiting.cancel(None);
    let result = waiting.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert!(
        !result
            .diagnostic
            .as_deref()
            .is_some_and(|d| d.contains("enforced")),
        "the agent stopped on session/cancel itself: {result:?}"
    );
    waiting.dispose().await;
    assert_eq!(host.live_processes(), 0);
}

/// Dispose ends the agent's whole tree: an agent that ignores stdin closing and SIGTERM, its
/// `setsid` grandchild and its double-forked daemon. Once the host has unloaded (which waits for
/// the processes its runs left ending), /proc shows none of them, not even as a zombie.
#[tokio::test]
async fn dispose_ends_what_the_agent_started_too() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let entry = format!(
        "[[plugin]]\nid = \"agent\"\nkind = \"acp\"\ncommand = [\"{}\", \"{}\"]\n",
        seam_tests::acp_python().display(),
        stubborn_agent().display()
    );
    let host = host_with(&entry).await;
    let mut events = watch_events(&host);
    let prompt = format!("spawn {} hang", pidfile.display());
    let run = host.subagents().start("agent", request(&prompt)).unwrap();
    // The chunk comes after the pid file is written.
    first_chunk(&mut events).await;
    let pids = left_behind(&pidfile);
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert_eq!(still_in_proc(&pids).len(), 3, "all three run: {pids:?}");
    let start = std::time::Instant::now();
    run.dispose().await;
    host.unload_all().await;
    let took = start.elapsed();
    assert_eq!(still_in_proc(&pids), Vec::<String>::new());
    assert_eq!(host.live_processes(), 0);
    eprintln!("dispose to the last reap: {took:?}");
}

/// An ACP entry running the fixture with extra `key=value` arguments (see the fixture's doc).
fn acp_entry_with(id: &str, args: &[String]) -> String {
    let mut argv = vec![
        seam_tests::acp_python().display().to_string(),
        fixture().display().to_string(),
    ];
    argv.extend(args.iter().cloned());
    let argv: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[[plugin]]\nid = \"{id}\"\nkind = \"acp\"\ncommand = [{}]\n",
        argv.join(", ")
    )
}

/// A remote child exists once it has a session: `started` stays pending while the agent holds
/// its `session/new` answer, and resolves once it has answered.
#[tokio::test]
async fn started_waits_for_the_session_to_exist() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("hold.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let host = host_with(&acp_entry_with(
        "agent",
        &[format!("hold-session={}", socket.display())],
    ))
    .await;
    let events = watch_events(&host);
    let run = host
        .subagents()
        .start("agent", request("echo made"))
        .unwrap();
    // The barrier: the agent has been asked for a session and holds its answer.
    let (stream, _) = tokio::time::timeout(BARRIER_TIMEOUT, listener.accept())
        .await
        .expect("the agent asks for its session")
        .unwrap();
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await.unwrap();
    assert_eq!(line, "session/new\n");
    assert_eq!(host.live_processes(), 1, "the agent process runs");
    let mut started = std::pin::pin!(run.started());
    assert!(
        futures::poll!(&mut started).is_pending(),
        "`started` before the session exists"
    );
    tokio::task::yield_now().await;
    assert!(futures::poll!(&mut started).is_pending());
    assert!(
        !events
            .borrow()
            .iter()
            .any(|e| matches!(e, Event::SubagentStart { .. })),
        "no subagent/start before the session exists"
    );
    write.write_all(b"go\n").await.unwrap();
    tokio::time::timeout(BARRIER_TIMEOUT, started)
        .await
        .expect("`started` resolves once the session exists")
        .unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(result.output_text(), "made");
    run.dispose().await;
    assert_eq!(host.live_processes(), 0);
}

/// An already-aborted signal starts no agent process, directly or through the subagent tool;
/// the same entry with a live signal does start one (the marker shows it).
#[tokio::test]
async fn an_already_aborted_signal_starts_no_agent_process() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let host = host_with(
        &(acp_entry_with("agent", &[format!("marker={}", marker.display())])
            + &entry(
                "ask",
                "subagent_tool",
                "provider = \"agent\", toolName = \"ask_agent\"",
            )),
    )
    .await;
    let seen = record(&host);
    let aborted = CancellationToken::new();
    aborted.cancel();

    let mut r = request("echo never");
    r.signal = Some(aborted.clone());
    let run = host.subagents().start("agent", r).unwrap();
    assert_eq!(host.live_processes(), 0, "no process was spawned");
    assert_eq!(run.started().await.unwrap_err().code(), "ABORTED");
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert!(result.output.is_empty(), "{result:?}");
    run.dispose().await;

    let through_tool = host
        .call_tool(
            "ask_agent",
            seam_host::ParentRef::top_level("p", "/w"),
            &json!({"description": "d", "prompt": "echo never"}).to_string(),
            aborted,
        )
        .await
        .unwrap();
    assert!(through_tool.is_error, "{through_tool:?}");
    assert_eq!(host.live_processes(), 0);
    assert_eq!(host.live_runs(), 0);
    assert!(
        !names(&seen).iter().any(|n| n.starts_with("subagent/")),
        "no run started: {:?}",
        names(&seen)
    );
    assert!(!marker.exists(), "the agent never started");

    // The control: a live signal starts the agent, which writes its marker first.
    let answered = run_answer(&host, "echo once").await;
    assert_eq!(answered, "once");
    let pid: u32 = std::fs::read_to_string(&marker)
        .expect("a started agent writes its marker")
        .trim()
        .parse()
        .unwrap();
    assert!(pid > 0);
    assert_eq!(host.live_processes(), 0);
}

async fn run_answer(host: &Host, prompt: &str) -> String {
    run(host, "agent", prompt).await.output_text()
}

// Dropping a live run's agent process hands its tree to a task; a runtime shutting down drops
// that task unpolled, and the drop used to hand the tree to a new task, again and again, until
// the stack overflowed (the whole test binary aborted). Now the tree is ended at once.
#[test]
fn a_live_agent_left_to_a_runtime_shutting_down_is_ended() {
    let tag = "acp-runtime-shutdown";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let host = host_with(&acp_entry("agent", tag, "", "")).await;
        let mut events = watch_events(&host);
        let run = host.subagents().start("agent", request("wait")).unwrap();
        first_chunk(&mut events).await;
        assert_eq!(processes_tagged(tag).len(), 1, "the agent runs");
        // Neither disposed nor unloaded: the run's task still holds the process.
        drop(run);
        drop(host);
    });
    drop(rt);
    assert_eq!(
        processes_tagged(tag),
        Vec::<u32>::new(),
        "the agent was ended"
    );
}

/// An ACP entry declaring `resume` keeps each run's exchange as its child's session; a message
/// to the finished child continues the agent's own session with `session/load` (the fixture
/// keeps its sessions in a folder), and an agent that does not offer it fails the resumed run
/// saying so.
#[tokio::test]
async fn an_acp_child_resumes_through_session_load_where_the_agent_offers_it() {
    use seam_host::{AgentScope, AgentStatus, ContentBlock, Delivery, StartRequest};
    let dir = tempfile::tempdir().unwrap();
    let kept = format!("sessions={}", dir.path().display());
    let host = host_with(&format!(
        "[models.scripts.default]\nsteps = [ {{ text = \"lead\" }} ]\n\n\
         {}config = {{ name = \"keeper\", resume = true }}\n\n{}config = {{ name = \"forgetter\", resume = true }}\n",
        acp_entry_with("keeper", &[kept, "acp-resume".into()]),
        acp_entry_with("forgetter", &["acp-resume".into()]),
    ))
    .await;
    assert!(
        host.subagents()
            .descriptor("keeper")
            .unwrap()
            .features
            .resume
    );
    let lead = host.create_agent(None, "/").unwrap();
    let me = lead.as_parent();
    let subagents = host.subagents();
    for provider in ["keeper", "forgetter"] {
        let run = subagents
            .start_background(
                lead.id(),
                provider,
                StartRequest::new("echo first words", me.clone()),
                provider.into(),
            )
            .unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(words(&result), "first words");
    }
    let children = subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(children.len(), 2, "{children:?}");
    assert!(children
        .iter()
        .all(|c| c.status == AgentStatus::Ready && c.id != c.run_id));

    let keeper = &children[0];
    let delivery = subagents
        .send_to_agent(&me, &keeper.id, vec![ContentBlock::text("history")])
        .unwrap();
    assert_eq!(delivery, Delivery::Woken);
    let forgetter = &children[1];
    subagents
        .send_to_agent(&me, &forgetter.id, vec![ContentBlock::text("history")])
        .unwrap();
    let mut results = Vec::new();
    for info in subagents.background_runs(lead.id()).into_iter().skip(2) {
        let (run, label) = subagents.background_run(lead.id(), &info.id).unwrap();
        results.push((label, run.result().await));
    }
    let (_, resumed) = results.iter().find(|(l, _)| l == "keeper").unwrap();
    assert_eq!(
        words(resumed.as_ref().unwrap()),
        "echo first words",
        "the agent's own session went on"
    );
    // It fails before its child exists: the attempt is refused, naming what is missing.
    let (_, refused) = results.iter().find(|(l, _)| l == "forgetter").unwrap();
    match refused {
        Err(e) => assert!(e.to_string().contains("session/load"), "{e}"),
        Ok(r) => {
            diagnosed(r, "session/load");
        }
    }
    // The kept child session holds both turns.
    let stored = host.agents().store().events(&keeper.id).unwrap();
    let turns = stored.iter().filter(|e| e.kind == "turn/start").count();
    assert_eq!(turns, 2, "{stored:?}");
    host.agents().dispose(lead.id()).await;
    assert_no_agent_left(&host, "acp-resume").await;
}

/// Contract 17 for an ACP child: its file requests obey the scope over its run, whatever its
/// entry grants. Scoped to the writable directory and to reads only, the agent reads there,
/// and neither reads the other granted directory nor writes anywhere.
#[tokio::test]
async fn file_requests_obey_the_scope_over_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (open, shut) = (dir.path().join("open"), dir.path().join("shut"));
    std::fs::create_dir_all(&open).unwrap();
    std::fs::create_dir_all(&shut).unwrap();
    std::fs::write(open.join("notes.txt"), "one").unwrap();
    std::fs::write(shut.join("secret.txt"), "hidden").unwrap();
    let grants = format!(
        "[plugin.grants]\ndirs = [{{ host = \"{}\", guest = \"/open\", write = true }}, \
         {{ host = \"{}\", guest = \"/shut\" }}]",
        open.display(),
        shut.display()
    );
    let host = host_with(&acp_entry("files", "acp-files", "", &grants)).await;
    let p = |path: &std::path::Path| path.display().to_string();
    let scoped = |prompt: String| {
        let host = host.clone();
        let open = open.canonicalize().unwrap();
        async move {
            let mut r = request(&prompt);
            r.scope = Some(seam_host::scope::Scope {
                dirs: Some(vec![open]),
                write: Some(false),
                ..Default::default()
            });
            let run = host.subagents().start("files", r).unwrap();
            let answer = words(&run.result().await.unwrap());
            run.dispose().await;
            answer
        }
    };
    assert_eq!(
        scoped(format!("read {}", p(&open.join("notes.txt")))).await,
        "read: one"
    );
    for (prompt, needle) in [
        (
            format!("read {}", p(&shut.join("secret.txt"))),
            "outside the directories granted",
        ),
        (
            format!("write {} x", p(&open.join("new.txt"))),
            "granted read-only",
        ),
    ] {
        let answer = scoped(prompt.clone()).await;
        assert!(
            answer.starts_with("error: ") && answer.contains(needle),
            "{prompt}: {answer}"
        );
    }
    assert!(!open.join("new.txt").exists());
    // Unscoped, the same entry still reaches both.
    assert_eq!(
        words(
            &run(
                &host,
                "files",
                &format!("read {}", p(&shut.join("secret.txt")))
            )
            .await
        ),
        "read: hidden"
    );
}
