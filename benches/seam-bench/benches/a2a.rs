//! Criterion benchmarks of what A2A adds to a run (issue 38), both sides in one process on
//! loopback:
//!
//! - `a2a/direct`: a top-level agent's turn on the scripted model (one model step that answers at
//!   once), made and disposed in-process: what `seam a2a` does for each task;
//! - `a2a/served`: the same turn as a task of `seam a2a` (`A2aServer`, a new context each time),
//!   reached by a run of a `kind = "a2a"` entry on a second host: the card was checked at load,
//!   then `SendStreamingMessage`, the stream of the task, its artifact and its end, the run
//!   settled and disposed.
//!
//! The difference is what A2A adds to a run; the goal is at most 1 ms.

use std::path::Path;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use seam_bench::{guest_dir, on_worker, options, runtime};
use seam_host::a2a::server::{A2aServer, HttpOptions};
use seam_host::config::Config;
use seam_host::{ContentBlock, Host, ParentRef, StartRequest};
use tokio_util::sync::CancellationToken;

const SERVED: &str = "[agent]\nmodel = \"scripted:remote\"\n\n[models.scripts.remote]\n\
                      steps = [{ text = \"answer: {prompt}\" }]\n";

fn config(text: &str) -> Config {
    Config::parse(text, Path::new("bench.toml"), &guest_dir()).expect("the bench config parses")
}

fn a2a(c: &mut Criterion) {
    let rt = runtime();
    let served = Host::new(options(1000)).expect("the served host starts");
    let report = rt.block_on(served.load(&config(SERVED)));
    assert!(report.is_ok(), "{:?}", report.failed);
    let shutdown = CancellationToken::new();
    let url = rt.block_on(async {
        let server = A2aServer::bind(
            HttpOptions::new("127.0.0.1:0".parse().expect("an address")),
            served.a2a_host(),
            Default::default(),
        )
        .await
        .expect("the A2A server binds");
        let url = server.url().expect("its URL");
        tokio::spawn(server.serve("/work".into(), shutdown.clone()));
        url
    });
    let origin = url.trim_end_matches('/').to_string();
    let caller = Host::new(options(1000)).expect("the calling host starts");
    let entry = format!(
        "[[plugin]]\nid = \"remote\"\nkind = \"a2a\"\nurl = \"{url}\"\ngrants = {{ http = [\"{origin}\"] }}\n"
    );
    let report = rt.block_on(caller.load(&config(&entry)));
    assert!(report.is_ok(), "the entry loads: {:?}", report.failed);

    let mut group = c.benchmark_group("a2a");
    group.bench_function("direct", |b| {
        b.iter_custom(|iters| {
            let host = served.clone();
            on_worker(&rt, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    let agent = host.create_agent(None, "/work").expect("an agent");
                    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
                    assert!(outcome.stop_reason.is_success());
                    host.agents().dispose(agent.id()).await;
                }
                t.elapsed()
            })
        })
    });
    group.bench_function("served", |b| {
        b.iter_custom(|iters| {
            let host = caller.clone();
            on_worker(&rt, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    let request = StartRequest::new("go", ParentRef::top_level("bench", "/work"));
                    let run = host.subagents().start("remote", request).expect("a run");
                    let result = run.result().await.expect("a result");
                    assert!(result.stop_reason.is_success(), "{result:?}");
                    run.dispose().await;
                }
                t.elapsed()
            })
        })
    });
    group.finish();
    shutdown.cancel();
    rt.block_on(caller.unload_all());
    rt.block_on(served.unload_all());
}

criterion_group!(benches, a2a);
criterion_main!(benches);
