//! Criterion benchmarks of the session store (issue: durable sessions):
//!
//! - `store/run_memory`, `store/run_sqlite`: the full mock-component run of `run/seam`, on a host
//!   keeping its run records and journal in memory, then in SQLite (WAL, a file in a temp dir
//!   under `target/`): what durability costs a run. With no listener, the run's records go to the
//!   store's writer thread, batched; `store/run_sqlite_observed` subscribes one listener
//!   (counting what it is given), so that every event is committed before it is delivered, as in
//!   `seam run`: the run's events are group-committed by the writer thread, which then delivers
//!   them (the run does not wait for the commit); the count is checked after a flush;
//! - `store/append`: one session event committed (its own transaction): the inverse is
//!   appends per second;
//! - `store/reload_10k`: a top-level agent continuing a 10,000-event session (read and parsed
//!   from SQLite, its completed turns kept), then disposed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use seam_bench::{host_with_store, options, repo, runtime, time_runs, MOCK};
use seam_host::session_store::{MemoryStore, SessionStore, SqliteStore, StoreLimits, Write};
use seam_host::Event;

fn sqlite(dir: &tempfile::TempDir, name: &str) -> Arc<SqliteStore> {
    let limits = StoreLimits {
        max_session_bytes: u64::MAX,
    };
    Arc::new(SqliteStore::open(&dir.path().join(name), limits).expect("the store opens"))
}

fn turn(session: &str, n: usize) -> Vec<Write> {
    let event = |kind: &str, body: serde_json::Value| Write::Append {
        session: session.into(),
        kind: kind.into(),
        body: body.to_string(),
    };
    vec![
        event(
            "turn/start",
            serde_json::json!({"type": "turn/start", "turn": n}),
        ),
        event(
            "user-message",
            serde_json::json!({"type": "user-message", "content": [{"type": "text", "value": format!("question {n}")}]}),
        ),
        event(
            "assistant-message",
            serde_json::json!({"type": "assistant-message", "text": format!("answer {n}"), "tool_calls": []}),
        ),
        event(
            "turn/end",
            serde_json::json!({"type": "turn/end", "turn": n, "reason": "completed"}),
        ),
    ]
}

fn store(c: &mut Criterion) {
    let rt = runtime();
    std::fs::create_dir_all(repo().join("target/tmp")).expect("target/tmp");
    let dir = tempfile::tempdir_in(repo().join("target/tmp")).expect("a temp dir");
    let mut group = c.benchmark_group("store");

    let memory: Arc<dyn SessionStore> = Arc::new(MemoryStore::default());
    let on_disk: Arc<dyn SessionStore> = sqlite(&dir, "runs.db");
    let observed: Arc<dyn SessionStore> = sqlite(&dir, "observed.db");
    for (name, store) in [
        ("run_memory", memory),
        ("run_sqlite", on_disk),
        ("run_sqlite_observed", observed),
    ] {
        let host = rt.block_on(host_with_store(options(1000), store));
        let heard = Arc::new(AtomicU64::new(0));
        if name == "run_sqlite_observed" {
            let heard = heard.clone();
            host.events().subscribe(move |event| {
                if matches!(
                    event,
                    Event::SubagentStart { .. } | Event::SubagentEnd { .. }
                ) {
                    heard.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
        }
        group.bench_function(name, |b| {
            b.iter_custom(|iters| time_runs(&rt, &host, MOCK, iters))
        });
        if name == "run_sqlite_observed" {
            // Every run's start and end reached the listener, once committed.
            host.events()
                .flush()
                .expect("the store writes what is queued");
            let heard = heard.load(Ordering::Relaxed);
            assert!(heard > 0 && heard.is_multiple_of(2), "{heard} events heard");
        }
        rt.block_on(host.unload_all());
    }

    let appends = sqlite(&dir, "appends.db");
    appends
        .commit(vec![Write::OpenSession {
            id: "bench".into(),
            agent: "agent:1".into(),
            parent: None,
            working_directory: "/".into(),
        }])
        .expect("a session");
    let mut n = 0;
    group.bench_function("append", |b| {
        b.iter(|| {
            n += 1;
            appends
                .commit(vec![Write::Append {
                    session: "bench".into(),
                    kind: "user-message".into(),
                    body: format!(
                        r#"{{"type":"user-message","content":[{{"type":"text","value":"{n}"}}]}}"#
                    ),
                }])
                .expect("an append");
        })
    });

    // 2,500 turns of four events: 10,000 events.
    let big = sqlite(&dir, "reload.db");
    let mut writes = vec![Write::OpenSession {
        id: "big".into(),
        agent: "agent:1".into(),
        parent: None,
        working_directory: "/".into(),
    }];
    for n in 1..=2_500 {
        writes.extend(turn("big", n));
    }
    big.commit(writes).expect("the big session");
    assert_eq!(big.events("big").expect("its events").len(), 10_000);
    let host = rt.block_on(host_with_store(options(10), big));
    let mut models = seam_host::model::ModelsConfig::default();
    models.scripts.insert(
        "default".into(),
        seam_host::model::Script {
            steps: Vec::new(),
            prices: None,
        },
    );
    host.models().configure(models);
    group.bench_function("reload_10k", |b| {
        b.iter(|| {
            let agent = host
                .create_agent_in(None, "/", Some("big"))
                .expect("the session continues");
            assert_eq!(agent.session().events().len(), 10_000);
            rt.block_on(host.agents().dispose(agent.id()));
        })
    });
    group.finish();
    rt.block_on(host.unload_all());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = store
}
criterion_main!(benches);
