//! Approvals (contract 17, part 2): a call whose tool entry says `approve = "ask"` waits for a
//! yes from whichever surface is there, is kept in the store, and reaches the top-level surface
//! from any depth; with no one to ask it is denied at once, saying how to allow it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use seam_host::approval::{Answer, ApprovalRecord, Status, Subject};
use seam_host::approvals::FnSurface;
use seam_host::{ContentBlock, Event, StopReason};
use seam_tests::*;

/// The lead calls `secret` (a mock behind the subagent tool, `approve` as given) twice, then
/// says what it read.
fn config(approve: &str, extra: &str) -> String {
    let call = r#"{ name = "secret", arguments = { description = "d", prompt = "open" } }"#;
    format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "asking", tool_calls = [{call}] }}, {{ text = "again", tool_calls = [{call}] }}, {{ text = "read: {{tool_results}}" }}]

{extra}
"#
    ) + &mock("vault", "reply = \"the secret\"")
        + &entry(
            "secret",
            "subagent_tool",
            &format!("provider = \"vault\", toolName = \"secret\", approve = {approve}"),
        )
}

/// A test surface, how many requests it was asked, and the last one.
type Asked = (
    Arc<dyn seam_host::approval::Surface>,
    Arc<AtomicUsize>,
    Arc<Mutex<Option<ApprovalRecord>>>,
);

/// A surface that answers every request with `answer`, counting them and keeping the last.
fn surface(answer: Answer) -> Asked {
    let asked = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(None));
    let (count, keep) = (asked.clone(), last.clone());
    let surface = FnSurface::new("test", move |r: &ApprovalRecord| {
        count.fetch_add(1, Ordering::SeqCst);
        *keep.lock().unwrap() = Some(r.clone());
        let answer = answer.clone();
        async move { Some(answer) }.boxed()
    });
    (surface, asked, last)
}

/// The lead starts `worker` (the spawn provider, its entry's config ending in `worker_extra`)
/// in the background, then takes the steps `lead_rest`; the child asks `secret` (the vault
/// behind `approve = "ask"`) and reads its answer.
fn background_worker(lead_rest: &str, worker_extra: &str) -> String {
    format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "delegating", tool_calls = [{{ name = "worker", arguments = {{ description = "d", prompt = "p", run_in_background = true }} }}] }},
    {lead_rest}
]

[models.scripts.child]
steps = [
    {{ text = "asking", tool_calls = [{{ name = "secret", arguments = {{ description = "d", prompt = "open" }} }}] }},
    {{ text = "child read: {{tool_results}}" }},
]
"#
    ) + &entry("spawn", "spawn_provider", "")
        + &mock("vault", "reply = \"the secret\"")
        + &entry(
            "secret",
            "subagent_tool",
            "provider = \"vault\", toolName = \"secret\", approve = \"ask\"",
        )
        + &entry(
            "worker",
            "subagent_tool",
            &format!("provider = \"spawn\", toolName = \"worker\", agentOptions = {{ model = \"scripted:child\" }}, runInBackground = true{worker_extra}"),
        )
}

/// Until the vault's run (the child's call of `secret`) has ended.
async fn vault_ran(events: &mut tokio::sync::watch::Receiver<Vec<Event>>) {
    wait_for(events, "the child's call of `secret` ends", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::SubagentEnd { provider, .. } if provider == "vault"))
    })
    .await;
}

async fn turn(host: &seam_host::Host) -> (StopReason, String) {
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    host.agents().dispose(agent.id()).await;
    (outcome.stop_reason, seam_host::blocks_text(&outcome.output))
}

fn starts(seen: &Arc<Mutex<Vec<Event>>>) -> usize {
    names(seen)
        .iter()
        .filter(|n| **n == "subagent/start")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_one_to_ask_a_call_is_denied_at_once_saying_how_to_allow_it() {
    let host = host_with(&config("\"ask\"", "")).await;
    let seen = record(&host);
    let (stop, text) = turn(&host).await;
    assert_eq!(stop, StopReason::Completed);
    assert!(text.contains("denied by nobody"), "{text}");
    assert!(
        text.contains("set `approve = \\\"allow\\\"` in the `config` of plugin `secret`")
            || text.contains("set `approve = \"allow\"` in the `config` of plugin `secret`"),
        "the diagnostic says how to allow it: {text}"
    );
    assert!(text.contains("seam approvals allow"), "{text}");
    assert_eq!(starts(&seen), 0, "the tool was called");
    // Both calls were asked and recorded, requested before resolved.
    let order: Vec<&str> = names(&seen)
        .into_iter()
        .filter(|n| n.starts_with("approval/"))
        .collect();
    assert_eq!(
        order,
        [
            "approval/requested",
            "approval/resolved",
            "approval/requested",
            "approval/resolved"
        ]
    );
    let kept = host.events().store().approvals(None).unwrap();
    assert_eq!(kept.len(), 2);
    assert!(kept
        .iter()
        .all(|r| r.status == Status::Denied && r.by.as_deref() == Some("nobody") && r.delivered));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yes_lets_the_call_go_and_a_no_stops_it() {
    let host = host_with(&config("\"ask\"", "")).await;
    let seen = record(&host);
    let (yes, asked, last) = surface(Answer::allow("test", false));
    let guard = host.subagents().approvals().add_surface(yes);
    let (_, text) = turn(&host).await;
    assert!(text.contains("read: the secret"), "{text}");
    assert_eq!(asked.load(Ordering::SeqCst), 2, "each call is asked");
    assert_eq!(starts(&seen), 2);
    let record = last.lock().unwrap().clone().unwrap();
    match &record.subject {
        Subject::Tool {
            tool,
            plugin,
            arguments,
        } => {
            assert_eq!((tool.as_str(), plugin.as_str()), ("secret", "secret"));
            assert_eq!(arguments["prompt"], "open");
        }
        other => panic!("{other:?}"),
    }
    drop(guard);

    let (no, _, _) = surface(Answer::deny("test", Some("not today".into())));
    let _guard = host.subagents().approvals().add_surface(no);
    let (_, text) = turn(&host).await;
    assert!(text.contains("denied by test"), "{text}");
    assert!(text.contains("not today"), "{text}");
    assert_eq!(starts(&seen), 2, "a denied call was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_is_remembered_for_the_session_and_deny_asks_no_one() {
    let host = host_with(&config("\"ask\"", "")).await;
    let (always, asked, _) = surface(Answer::allow("test", true));
    let _guard = host.subagents().approvals().add_surface(always);
    let (_, text) = turn(&host).await;
    assert!(text.contains("read: the secret"), "{text}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the second call was asked again"
    );

    let host = host_with(&config("\"deny\"", "")).await;
    let (yes, asked, _) = surface(Answer::allow("test", false));
    let _guard = host.subagents().approvals().add_surface(yes);
    let (_, text) = turn(&host).await;
    assert!(text.contains("the config says `deny`"), "{text}");
    assert_eq!(asked.load(Ordering::SeqCst), 0);
}

/// A grandchild's request reaches the top-level surface, naming the path of runs that asked,
/// while its parent and grandparent wait; the grandchild's tool runs once allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_from_deep_in_the_tree_reaches_the_top_with_its_path() {
    let call = |tool: &str| {
        format!("tool_calls = [{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}]")
    };
    let toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "delegating", {down} }}, {{ text = "lead: {{tool_results}}" }}]

[models.scripts.a]
steps = [{{ text = "a", {deeper} }}, {{ text = "a: {{tool_results}}" }}]

[models.scripts.b]
steps = [{{ text = "b", {secret} }}, {{ text = "b: {{tool_results}}" }}]
"#,
        down = call("down"),
        deeper = call("deeper"),
        secret = r#"tool_calls = [{ name = "secret", arguments = { description = "d", prompt = "p" } }]"#,
    ) + &entry("spawn", "spawn_provider", "")
        + &mock("vault", "reply = \"the secret\"")
        + &entry(
            "secret",
            "subagent_tool",
            "provider = \"vault\", toolName = \"secret\", approve = { \"*\" = \"ask\" }",
        )
        + &entry(
            "down",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"down\", agentOptions = { model = \"scripted:a\" }",
        )
        + &entry(
            "deeper",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"deeper\", agentOptions = { model = \"scripted:b\" }",
        );
    let host = host_with(&toml).await;
    let (yes, asked, last) = surface(Answer::allow("test", false));
    let _guard = host.subagents().approvals().add_surface(yes);
    let (stop, _) = turn(&host).await;
    assert_eq!(stop, StopReason::Completed);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let record = last.lock().unwrap().clone().unwrap();
    assert_eq!(record.path.len(), 3, "lead > run > run: {:?}", record.path);
    assert_ne!(
        record.session, record.root,
        "asked in the grandchild's session"
    );
    assert_eq!(host.live_runs(), 0);
}

/// `[approvals] timeout_secs`: a request no one answers is denied when it runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_no_one_answers_is_denied_by_its_timeout() {
    let host = host_with(&config("\"ask\"", "[approvals]\ntimeout_secs = 1\n")).await;
    let silent = FnSurface::new("silent", |_: &ApprovalRecord| {
        futures::future::pending::<Option<Answer>>().boxed()
    });
    let _guard = host.subagents().approvals().add_surface(silent);
    let (_, text) = turn(&host).await;
    assert!(text.contains("denied by timeout"), "{text}");
    assert!(text.contains("timeout_secs"), "{text}");
}

/// A surface that cannot answer (an MCP client with no elicitation, an editor that does not
/// offer permission requests) says so with `None`: when every surface did, the request is
/// denied at once as if there were none, not left to its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_surface_cannot_answer_the_request_is_denied_at_once() {
    // A timeout far past the test's: only the rule ends the wait.
    let host = host_with(&config("\"ask\"", "[approvals]\ntimeout_secs = 3600\n")).await;
    let unable = FnSurface::new("unable", |_: &ApprovalRecord| async { None }.boxed());
    let _guard = host.subagents().approvals().add_surface(unable);
    let (_, text) = turn(&host).await;
    assert!(text.contains("denied by nobody"), "{text}");
    assert!(text.contains("To allow it"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_approve_is_refused_naming_the_key_and_a_provider_cannot_have_one() {
    let bad = config("\"maybe\"", "");
    let e = seam_host::config::Config::parse(&bad, std::path::Path::new("t.toml"), &guest_dir())
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.approve") && e.contains("secret"), "{e}");

    let parse = |text: &str| {
        seam_host::config::Config::parse(text, std::path::Path::new("t.toml"), &guest_dir())
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let e = parse("[approvals]\ntimeout_secs = 0\n");
    assert!(
        e.contains("[approvals]") && e.contains("timeout_secs"),
        "{e}"
    );
    let e = parse("[approvals]\nwrite = \"sometimes\"\n");
    assert!(e.contains("approvals") && e.contains("sometimes"), "{e}");
    let e = parse(&config("\"ask\", approver = \"grandparent\"", ""));
    assert!(
        e.contains("config.approver") && e.contains("grandparent"),
        "{e}"
    );

    let host = test_host();
    let report = host
        .load(&seam_tests::config(
            &(mock("vault", "approve = \"ask\"") + &mock("other", "approver = \"parent\"")),
        ))
        .await;
    let failures = report.failures();
    assert!(failures.contains("config.approve"), "{failures}");
    assert!(failures.contains("config.approver"), "{failures}");
    assert!(failures.contains("provider"), "{failures}");
}

/// `config.approver = "parent"`: a background child's request goes to the agent that delegated,
/// not to the host's surfaces; the parent's model lists it and allows it with the control tool,
/// and the child's call goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parent_named_as_approver_answers_with_its_control_tool() {
    let lead = r#"
    { text = "waiting", tool_calls = [{ name = "approvals", arguments = { timeout_ms = 60000 } }] },
    { text = "answering", tool_calls = [{ name = "approve", arguments = { allow = true } }] },
    { text = "lead: {tool_results}" },"#;
    let toml = background_worker(lead, ", approver = \"parent\"")
        + &entry("approvals", "subagent_control", "action = \"approvals\"")
        + &entry("approve", "subagent_control", "action = \"approve\"");
    let host = host_with(&toml).await;
    // A host surface that would deny: it must not be the one asked.
    let (no, asked, _) = surface(Answer::deny("test", None));
    let _guard = host.subagents().approvals().add_surface(no);
    let mut events = watch_events(&host);
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    let text = seam_host::blocks_text(&outcome.output);
    assert!(text.contains("allowed"), "{text}");
    vault_ran(&mut events).await;
    let seen = events.borrow().clone();
    let resolved: Vec<&Event> = seen
        .iter()
        .filter(|e| matches!(e, Event::ApprovalResolved { .. }))
        .collect();
    assert!(
        matches!(resolved.as_slice(), [Event::ApprovalResolved { allowed: true, by, .. }] if by == "parent"),
        "{resolved:?}"
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "the host's surface was asked"
    );
    host.agents().dispose(agent.id()).await;
}

/// `[approvals] write = "ask"`: a run's first write in its granted directories waits for a yes;
/// denied, the write fails and nothing is written; allowed, it goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_a_grant_waits_for_a_yes_when_writes_ask() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let toml = format!(
        "[approvals]\nwrite = \"ask\"\n\n{}[plugin.grants]\ndirs = [{{ host = '{}', guest = '/out', write = true }}]\n",
        entry(
            "writer",
            "hostile_provider",
            "name = \"writer\", mode = \"write-file\", path = \"/out/note.txt\""
        ),
        out.display()
    );
    let host = host_with(&toml).await;
    let seen = record(&host);
    let (no, asked, last) = surface(Answer::deny("test", None));
    let guard = host.subagents().approvals().add_surface(no);
    let result = host
        .subagents()
        .start("writer", request("x"))
        .unwrap()
        .result()
        .await
        .unwrap();
    assert!(!out.join("note.txt").exists(), "written: {result:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    match &last.lock().unwrap().as_ref().unwrap().subject {
        Subject::Grant {
            class,
            plugin,
            target,
        } => {
            assert_eq!(*class, seam_host::approval::GrantClass::Write);
            assert_eq!(plugin, "writer");
            assert!(
                target.contains(&out.canonicalize().unwrap().display().to_string()),
                "{target}"
            );
        }
        other => panic!("{other:?}"),
    }
    drop(guard);

    let (yes, asked, _) = surface(Answer::allow("test", false));
    let _guard = host.subagents().approvals().add_surface(yes);
    let result = host
        .subagents()
        .start("writer", request("x"))
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(words(&result), "ok: written");
    assert_eq!(
        std::fs::read_to_string(out.join("note.txt")).unwrap(),
        "pwned"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1, "asked once for the run");
    assert_eq!(
        names(&seen)
            .iter()
            .filter(|n| **n == "approval/requested")
            .count(),
        2
    );
}

/// `[approvals] http = "ask"`: a run's first request to a granted origin waits for a yes; a
/// denied one sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_request_to_a_granted_origin_waits_for_a_yes_when_http_asks() {
    use super::loopback::{ok, Server};
    let reply = || {
        ok(serde_json::json!({"choices": [{"index": 0,
            "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}]}))
    };
    let server = Server::start(vec![reply(), reply()]).await;
    let origin = server.base_url().trim_end_matches("/v1").to_string();
    let toml = format!(
        r#"[approvals]
http = "ask"

[[plugin]]
id = "remote"
component = "http_agent_provider.wasm"
config = {{ name = "remote", endpoint = "{endpoint}", model = "m", stream = false }}
[plugin.grants]
http = ["{origin}"]
"#,
        endpoint = server.base_url(),
    );
    let host = host_with(&toml).await;
    let (no, _, last) = surface(Answer::deny("test", Some("not that server".into())));
    let guard = host.subagents().approvals().add_surface(no);
    let denied = host
        .subagents()
        .start("remote", request("x"))
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(server.seen().len(), 0, "sent before the yes: {denied:?}");
    match &last.lock().unwrap().as_ref().unwrap().subject {
        Subject::Grant { target, .. } => assert_eq!(target, &origin),
        other => panic!("{other:?}"),
    }
    drop(guard);
    let (yes, _, _) = surface(Answer::allow("test", false));
    let _guard = host.subagents().approvals().add_surface(yes);
    let allowed = host
        .subagents()
        .start("remote", request("x"))
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(words(&allowed), "the answer");
    assert_eq!(server.seen().len(), 1);
}

/// `[approvals] process = "ask"`: an ACP provider's run starts its agent's program only on a
/// yes; denied, the run fails saying so and no process is started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acp_agent_starts_only_on_a_yes_when_process_asks() {
    let tag = "acp-approve";
    let toml = "[approvals]\nprocess = \"ask\"\n\n".to_string()
        + &super::acp::acp_entry("agent", tag, "name = \"helper\"", "");
    let host = host_with(&toml).await;
    let (no, _, last) = surface(Answer::deny("test", None));
    let guard = host.subagents().approvals().add_surface(no);
    let denied = host
        .subagents()
        .start("helper", request("echo hi"))
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(denied.stop_reason, StopReason::Error);
    let diagnostic = denied.diagnostic.clone().unwrap_or_default();
    assert!(diagnostic.contains("denied by test"), "{diagnostic}");
    assert!(matches!(&last.lock().unwrap().as_ref().unwrap().subject,
            Subject::Grant { class: seam_host::approval::GrantClass::Process, target, .. } if target.contains("acp_agent.py")),);
    assert_eq!(host.live_processes(), 0);
    drop(guard);
    let (yes, _, _) = surface(Answer::allow("test", false));
    let _guard = host.subagents().approvals().add_surface(yes);
    let allowed = host
        .subagents()
        .start("helper", request("echo hi"))
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(words(&allowed), "hi");
    super::acp::assert_no_agent_left(&host, tag).await;
}

/// A background child's request reaches the host's surface after its parent's turn is over,
/// and its call goes ahead once allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_childs_request_reaches_the_top_level_surface() {
    let toml = background_worker(r#"{ text = "lead done" },"#, "");
    let host = host_with(&toml).await;
    let (yes, asked, last) = surface(Answer::allow("test", false));
    let _guard = host.subagents().approvals().add_surface(yes);
    let mut events = watch_events(&host);
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    vault_ran(&mut events).await;
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let record = last.lock().unwrap().clone().unwrap();
    assert_eq!(
        record.path.len(),
        2,
        "lead > background run: {:?}",
        record.path
    );
    assert_eq!(record.path[0], agent.id());
    host.agents().dispose(agent.id()).await;
}

/// An ACP entry's `permissions = "ask"`: the agent's own permission request is asked of the
/// host's surface, as a call of the run's tree; its answer picks the agent's option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acp_agents_permission_request_is_asked_when_its_entry_says_ask() {
    let tag = "acp-ask";
    let host = host_with(&super::acp::acp_entry(
        "agent",
        tag,
        "name = \"helper\", permissions = \"ask\"",
        "",
    ))
    .await;
    for (answer, option) in [
        (Answer::allow("test", false), "yes"),
        (Answer::deny("test", None), "no"),
    ] {
        let (s, asked, last) = surface(answer);
        let _guard = host.subagents().approvals().add_surface(s);
        let result = host
            .subagents()
            .start("helper", request("permission edit"))
            .unwrap()
            .result()
            .await
            .unwrap();
        assert_eq!(words(&result), option);
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        let record = last.lock().unwrap().clone().unwrap();
        assert!(
            matches!(&record.subject, Subject::Tool { plugin, .. } if plugin == "agent"),
            "{record:?}"
        );
    }
    super::acp::assert_no_agent_left(&host, tag).await;
}
