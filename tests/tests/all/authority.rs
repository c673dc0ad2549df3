//! Authority only narrows (contract 17): a child never sees a tool its parent could not call,
//! whatever its own tool filter asks for, on the real spawn provider and subagent tool.

use seam_host::{ContentBlock, StopReason};
use seam_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_filter_is_a_ceiling_never_a_grant() {
    let call = |tool: &str| {
        format!("tool_calls = [{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}]")
    };
    let toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "lead sees {{tools}}", {narrow} }}, {{ text = "{{tool_results}}" }}]

[models.scripts.a]
steps = [{{ text = "a sees {{tools}}", {deeper} }}, {{ text = "a: {{tool_results}}" }}]

[models.scripts.b]
steps = [{{ text = "b sees {{tools}}" }}]

"#,
        narrow = call("narrow"),
        deeper = call("deeper"),
    ) + &entry("spawn", "spawn_provider", "")
        + &mock("vault", "reply = \"the secret\"")
        + &entry("secret", "subagent_tool", "provider = \"vault\", toolName = \"secret\"")
        // The lead's child sees only `deeper`.
        + &entry(
            "narrow",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"narrow\", agentOptions = { model = \"scripted:a\" }, toolFilter = { allow = [\"deeper\"] }",
        )
        // Its child asks for `secret` too, which its parent lacked.
        + &entry(
            "deeper",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"deeper\", agentOptions = { model = \"scripted:b\" }, toolFilter = { allow = [\"secret\", \"deeper\"] }",
        );
    let host = host_with(&toml).await;
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    host.agents().dispose(agent.id()).await;
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let text = seam_host::blocks_text(&outcome.output);
    assert!(text.contains("a: b sees deeper"), "{text}");
    assert!(
        !text.contains("secret"),
        "the grandchild was given what its parent lacked: {text}"
    );
    assert_eq!(host.live_runs(), 0);
}

/// A delegation's `config.scope` narrows what every call and run below it may reach, checked
/// as each store is made: the HTTP agent provider, granted the endpoint's origin, is denied it
/// for the runs started through a tool whose scope leaves it out, and still reaches it for the
/// runs started through a tool with no scope.
#[tokio::test]
async fn a_scope_narrows_what_the_runs_below_a_delegation_may_reach() {
    use super::loopback::{ok, Server};
    let server = Server::start(vec![ok(serde_json::json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}]}))])
    .await;
    let origin = server.base_url().trim_end_matches("/v1").to_string();
    let call = |tool: &str| {
        format!("{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}")
    };
    let toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "asking", tool_calls = [{scoped}, {free}] }}, {{ text = "{{tool_results}}" }}]

[[plugin]]
id = "remote"
component = "http_agent_provider.wasm"
config = {{ name = "remote", endpoint = "{endpoint}", model = "m", stream = false }}
[plugin.grants]
http = ["{origin}"]

"#,
        scoped = call("ask_scoped"),
        free = call("ask_free"),
        endpoint = server.base_url(),
    ) + &entry(
        "ask_scoped",
        "subagent_tool",
        "provider = \"remote\", toolName = \"ask_scoped\", scope = { http = [\"https://elsewhere.example\"] }",
    ) + &entry(
        "ask_free",
        "subagent_tool",
        "provider = \"remote\", toolName = \"ask_free\"",
    );
    let host = host_with(&toml).await;
    // On this thread (a current-thread runtime): every task logs where the capture is.
    let (logs, _guard) = CapturedLog::start();
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    host.agents().dispose(agent.id()).await;
    let text = seam_host::blocks_text(&outcome.output);
    assert_eq!(text.matches("the answer").count(), 1, "{text}");
    assert!(
        text.contains("the host denied the request: its origin is not granted"),
        "{text}"
    );
    assert_eq!(server.seen().len(), 1, "the scoped run sent nothing");
    let denial = logs.of_plugin("remote", "removed for this subtree");
    assert!(
        denial
            .iter()
            .any(|l| l.contains("the scope of `remote-") && l.contains("config.scope")),
        "the denial names the scope that removed the grant: {denial:?}"
    );
}

/// The subagent tool's `scope` argument, asked by the model, only narrows: a run asked to keep
/// away from the endpoint is denied it, a run under an entry scope that removed it stays denied
/// however much the model asks for, and a malformed scope is a tool error naming the key.
#[tokio::test]
async fn a_scope_the_model_asks_for_narrows_and_never_widens() {
    use super::loopback::{ok, Server};
    let server = Server::start(vec![ok(serde_json::json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}]}))])
    .await;
    let origin = server.base_url().trim_end_matches("/v1").to_string();
    let call = |tool: &str, scope: &str| {
        format!(
            "{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\"{scope} }} }}"
        )
    };
    let calls = [
        // Asks to keep away from everything but elsewhere: the endpoint is removed.
        call(
            "ask",
            ", scope = { http = [\"https://elsewhere.example\"] }",
        ),
        // Asks for the endpoint back under an entry that removed it: still removed.
        call(
            "ask_narrow",
            &format!(", scope = {{ http = [\"{origin}\"] }}"),
        ),
        // Malformed, by the tool and by the host.
        call("ask", ", scope = { files = [] }"),
        call("ask", ", scope = { dirs = [\"relative\"] }"),
        // Asks for what it has: reaches the endpoint.
        call("ask", &format!(", scope = {{ http = [\"{origin}\"] }}")),
    ]
    .join(", ");
    let toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "asking", tool_calls = [{calls}] }}, {{ text = "{{tool_results}}" }}]

[[plugin]]
id = "remote"
component = "http_agent_provider.wasm"
config = {{ name = "remote", endpoint = "{endpoint}", model = "m", stream = false }}
[plugin.grants]
http = ["{origin}"]

"#,
        endpoint = server.base_url(),
    ) + &entry(
        "ask",
        "subagent_tool",
        "provider = \"remote\", toolName = \"ask\", scopeArgument = true",
    ) + &entry(
        "ask_narrow",
        "subagent_tool",
        "provider = \"remote\", toolName = \"ask_narrow\", scopeArgument = true, scope = { http = [\"https://elsewhere.example\"] }",
    );
    let host = host_with(&toml).await;
    let schema = host
        .tools()
        .get("ask")
        .expect("mounted")
        .descriptor
        .parameters;
    assert!(
        schema["properties"]["scope"]["properties"]["tools"].is_object(),
        "the tool documents its optional `scope`: {schema}"
    );
    assert!(!schema["required"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("scope")));
    let (logs, _guard) = CapturedLog::start();
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    host.agents().dispose(agent.id()).await;
    let text = seam_host::blocks_text(&outcome.output);
    assert_eq!(text.matches("the answer").count(), 1, "{text}");
    assert_eq!(
        text.matches("the host denied the request: its origin is not granted")
            .count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("argument `scope` has the unknown key `files`"),
        "{text}"
    );
    assert!(
        text.contains("key `scope`: `dirs` holds `relative`"),
        "{text}"
    );
    assert_eq!(
        server.seen().len(),
        1,
        "only the unnarrowed run sent anything"
    );
    let denial = logs.of_plugin("remote", "removed for this subtree");
    assert_eq!(denial.len(), 2, "{denial:?}");
}

/// Sockets, environment variables and directories that a scope removes are missing from the
/// run's store, and what the plugin is denied is logged naming the grant, the run whose scope
/// removed it and the `config.scope` line that would allow it.
#[tokio::test(flavor = "current_thread")]
async fn socket_env_and_dir_denials_under_a_scope_name_its_holder() {
    use seam_host::scope::Scope;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host_dir = dir.path().canonicalize().unwrap();
    std::fs::write(host_dir.join("readme.txt"), "granted").unwrap();
    let grant = format!(
        "[plugin.grants]\nnetwork = [\"{addr}\"]\nenv = [\"PATH\"]\n\
         dirs = [{{ host = \"{}\", guest = \"/data\" }}]\n",
        host_dir.display()
    );
    let hostile = |id: &str, extra: &str| {
        entry(id, "hostile_provider", &format!("name = \"{id}\", {extra}")) + &grant + "\n"
    };
    let toml = hostile("connect", &format!("mode = \"connect\", addr = \"{addr}\""))
        + &hostile("path", "mode = \"env\", var = \"PATH\"")
        + &hostile("ls", "mode = \"list-dir\", path = \"/data\"");
    let host = host_with(&toml).await;
    let (logs, _guard) = CapturedLog::start();
    let run = |name: &'static str, scope: Scope| {
        let host = host.clone();
        async move {
            let mut req = request("x");
            req.scope = Some(scope);
            let run = host.subagents().start(name, req).unwrap();
            let id = run.id().to_string();
            let result = run.result().await.unwrap();
            run.dispose().await;
            (id, words(&result))
        }
    };
    // Unscoped, each reaches what it is granted.
    assert!(run("connect", Scope::default())
        .await
        .1
        .starts_with("ok: connected"));
    assert!(run("path", Scope::default()).await.1.starts_with("set: "));
    assert_eq!(run("ls", Scope::default()).await.1, "ok: readme.txt");

    let (id, out) = run(
        "connect",
        Scope {
            network: Some(vec!["127.0.0.1:1".into()]),
            ..Scope::default()
        },
    )
    .await;
    assert!(out.starts_with("denied: "), "{out}");
    let warned = logs.of_plugin("connect", &format!("the scope of `{id}` removed"));
    assert_eq!(warned.len(), 1, "{:#?}", logs.lines());
    assert!(
        warned[0].contains("to `network` in the `config.scope`"),
        "{warned:?}"
    );

    let (id, out) = run(
        "path",
        Scope {
            env: Some(vec![]),
            ..Scope::default()
        },
    )
    .await;
    assert_eq!(out, "unset");
    let told = logs.of_plugin("path", &format!("the scope of `{id}` removed"));
    assert!(
        told.iter()
            .any(|l| l.contains("environment variable `PATH`") && l.contains("add PATH to `env`")),
        "{:#?}",
        logs.lines()
    );

    let (id, out) = run(
        "ls",
        Scope {
            dirs: Some(vec!["/nowhere".into()]),
            ..Scope::default()
        },
    )
    .await;
    assert!(out.starts_with("denied: "), "{out}");
    let told = logs.of_plugin("ls", &format!("the scope of `{id}` removed"));
    assert!(
        told.iter().any(
            |l| l.contains(&format!("directory `{}`", host_dir.display()))
                && l.contains("to `dirs`")
        ),
        "{:#?}",
        logs.lines()
    );
}
