//! Criterion benchmarks of what serving a tool over MCP adds to a call (`seam mcp`), against
//! the same call in-process (what `seam call` makes, without its process start):
//!
//! - `mcp/direct`: `Host::call_tool` of the subagent tool `ask` (a full mock-component run);
//! - `mcp/stdio`: the same call by an rmcp client to `seam_host`'s MCP server over an in-memory
//!   byte pipe, framed as on stdio (JSON lines);
//! - `mcp/http`: the same call by rmcp's streamable HTTP client to `seam mcp --http`'s endpoint
//!   on loopback;
//! - `mcp/mounted`: a `kind = "mcp"` entry's tool (the FastMCP fixture's `add`, over stdio)
//!   called as an agent calls it, against the same server called directly by the official Python
//!   client (`mcp_client.py direct`, timed by itself, written to `target/seam-bench/mcp_direct.json`).
//!
//! The goal (issue 23) is at most 1 ms added per call.

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, ServiceExt};
use seam_bench::{guest_dir, host_with, on_worker, options, repo, runtime, write_result};
use seam_host::mcp::server::http::{HttpOptions, McpHttp};
use seam_host::mcp::server::McpServer;
use seam_host::{Host, ParentRef};
use tokio_util::sync::CancellationToken;

/// The subagent tool, bound to the mock provider the bench host loads.
const ASK: &str = "[[plugin]]\nid = \"ask\"\ncomponent = \"subagent_tool.wasm\"\n\
                   config = { provider = \"mock\", toolName = \"ask\" }\n";

fn arguments() -> JsonObject {
    match serde_json::json!({"description": "d", "prompt": "the sources"}) {
        serde_json::Value::Object(o) => o,
        _ => unreachable!("an object literal"),
    }
}

async fn call(client: &RunningService<RoleClient, ()>) {
    let mut params = CallToolRequestParams::new("ask");
    params.arguments = Some(arguments());
    let result = client
        .peer()
        .call_tool_once(params)
        .await
        .expect("the call");
    assert!(matches!(
        result,
        rmcp::model::CallToolResponse::Complete(ref r) if r.is_error != Some(true)
    ));
}

async fn stdio_client(host: &Host) -> RunningService<RoleClient, ()> {
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_end);
    let server = McpServer::new(host.tool_host(), "bench", "/work");
    tokio::spawn(async move {
        let running = server
            .serve(AsyncRwTransport::new_server(server_read, server_write))
            .await
            .expect("the server initializes");
        let _ = running.waiting().await;
    });
    let (client_read, client_write) = tokio::io::split(client_end);
    ().serve(AsyncRwTransport::new_client(client_read, client_write))
        .await
        .expect("the client initializes")
}

async fn http_client(host: &Host) -> RunningService<RoleClient, ()> {
    let endpoint = McpHttp::bind(HttpOptions::new("127.0.0.1:0".parse().unwrap()))
        .await
        .expect("the endpoint binds");
    let addr = endpoint.local_addr().unwrap();
    tokio::spawn(endpoint.serve(host.tool_host(), "/work".into(), CancellationToken::new()));
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    ().serve(transport).await.expect("the client initializes")
}

fn mcp(c: &mut Criterion) {
    let rt = runtime();
    let host = rt.block_on(host_with(options(1000), "", 1000, ASK));
    let mut group = c.benchmark_group("mcp");
    group.bench_function("direct", |b| {
        b.iter_custom(|iters| {
            let host = host.clone();
            on_worker(&rt, async move {
                let args = serde_json::Value::Object(arguments()).to_string();
                let t = Instant::now();
                for _ in 0..iters {
                    let caller = ParentRef::top_level("bench", "/work");
                    let result = host
                        .call_tool("ask", caller, &args, CancellationToken::new())
                        .await
                        .expect("the tool is mounted");
                    assert!(!result.is_error, "{}", result.text());
                }
                t.elapsed()
            })
        })
    });
    let stdio = rt.block_on(stdio_client(&host));
    let stdio = std::sync::Arc::new(stdio);
    group.bench_function("stdio", |b| {
        b.iter_custom(|iters| {
            let client = stdio.clone();
            on_worker(&rt, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    call(&client).await;
                }
                t.elapsed()
            })
        })
    });
    let http = std::sync::Arc::new(rt.block_on(http_client(&host)));
    group.bench_function("http", |b| {
        b.iter_custom(|iters| {
            let client = http.clone();
            on_worker(&rt, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    call(&client).await;
                }
                t.elapsed()
            })
        })
    });
    // A mounted FastMCP server, called as a Seam agent calls its tools.
    let python = repo().join("target/toolchains/python/bin/python");
    let server = repo().join("tests/fixtures/mcp_server.py");
    let entry = format!(
        "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = [\"{}\", \"{}\", \"stdio\"]\n",
        python.display(),
        server.display()
    );
    let mounted = rt.block_on(async {
        let host = Host::new(options(10)).expect("the host starts");
        let config =
            seam_host::Config::parse(&entry, std::path::Path::new("mcp.toml"), &guest_dir())
                .expect("the entry parses");
        let report = host.load(&config).await;
        assert!(
            report.is_ok(),
            "the FastMCP fixture mounts (make setup-kit): {:?}",
            report.failed
        );
        host
    });
    group.bench_function("mounted", |b| {
        b.iter_custom(|iters| {
            let host = mounted.clone();
            on_worker(&rt, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    let caller = ParentRef::top_level("bench", "/work");
                    let result = host
                        .call_tool(
                            "fx__add",
                            caller,
                            r#"{"a":2,"b":3}"#,
                            CancellationToken::new(),
                        )
                        .await
                        .expect("the tool is mounted");
                    assert!(!result.is_error, "{}", result.text());
                }
                t.elapsed()
            })
        })
    });
    group.finish();
    rt.block_on(mounted.unload_all());
    // The same server called directly by the official Python client, in the same run.
    let out = std::process::Command::new(&python)
        .arg(repo().join("tests/fixtures/mcp_client.py"))
        .args([
            "direct",
            &python.display().to_string(),
            &server.display().to_string(),
            "500",
        ])
        .output()
        .expect("the Python client runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let direct: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its JSON");
    eprintln!("mcp direct (Python client): {direct}");
    write_result("mcp_direct", &direct);
}

criterion_group!(benches, mcp);
criterion_main!(benches);
