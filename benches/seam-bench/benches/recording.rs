//! Criterion benchmarks of what recording costs a turn (issue 37), on a SQLite store:
//!
//! - `recording/off`: a top-level agent's turn on the scripted model that delegates once to
//!   the mock component through the subagent tool and answers (two model calls, one run), with
//!   `[recording] enabled = false`;
//! - `recording/on`: the same turn recorded: each model reply (and a digest of each message of
//!   its request) is kept under the agent's key, written with the session's own writes.
//!
//! The goal is at most 1.10×.

use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use seam_bench::{guest_dir, options, runtime};
use seam_host::config::Config;
use seam_host::session_store::{SessionStore, SqliteStore, StoreLimits};
use seam_host::{ContentBlock, Host};

fn config(enabled: bool) -> Config {
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[recording]
enabled = {enabled}

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [{{ name = "research", arguments = {{ description = "d", prompt = "the sources" }} }}] }},
    {{ text = "read: {{tool_results}}" }},
]

[[plugin]]
id = "researcher"
component = "mock_provider.wasm"
config = {{ name = "researcher", reply = "Notes on {{prompt}}" }}

[[plugin]]
id = "research"
component = "subagent_tool.wasm"
config = {{ provider = "researcher", toolName = "research" }}
"#
    );
    Config::parse(&text, Path::new("bench.toml"), &guest_dir()).expect("the bench config parses")
}

fn recording(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let store: Arc<dyn SessionStore> = Arc::new(
        SqliteStore::open(&dir.path().join("bench.db"), StoreLimits::default())
            .expect("the bench store opens"),
    );
    let host = Host::with_store(options(1000), store).expect("the bench host starts");
    let mut group = c.benchmark_group("recording");
    for (name, enabled) in [("off", false), ("on", true)] {
        let report = rt.block_on(host.load(&config(enabled)));
        assert!(
            report.is_ok(),
            "the bench config loads: {:?}",
            report.failed
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let agent = host.create_agent(None, "/work").expect("an agent");
                    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
                    assert!(outcome.stop_reason.is_success());
                    host.agents().dispose(agent.id()).await;
                })
            })
        });
    }
    group.finish();
    rt.block_on(host.unload_all());
}

criterion_group!(benches, recording);
criterion_main!(benches);
