//! Criterion benchmarks of what authority checks cost a tool call (issue 36):
//!
//! - `authority/narrow-none`: the grants of a call with no scope over it (its plugin's, shared);
//! - `authority/narrow-3-scopes`: the grants of a call under three nested scopes, each
//!   narrowing directories, write access, HTTP origins, addresses and environment names (what
//!   every scoped call's store is made with);
//! - `authority/tool-in-3-scopes`: whether a tool is in the `tools` of three nested scopes (what
//!   every call of a scoped agent pays);
//! - `authority/approve-policy`: whether a call needs a yes, for an MCP entry with three
//!   patterns (what every call of a tool with `approve` pays before it is made).
//!
//! The goal is under 1 µs for each check.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use seam_host::approval::EntryPolicy;
use seam_host::sandbox::{DirGrant, Granted};
use seam_host::scope::{Scope, ScopeChain};

fn granted() -> Granted {
    let dir = |host: &str, guest: &str, write: bool| DirGrant {
        host: PathBuf::from(host),
        guest: guest.into(),
        write,
    };
    let mut granted = Granted::default();
    granted.dirs = vec![
        dir("/srv/docs", "/docs", false),
        dir("/srv/docs/drafts", "/drafts", true),
        dir("/srv/cache", "/cache", true),
    ];
    granted.env = vec!["API_KEY".into(), "REGION".into(), "HOME".into()];
    granted.http = [
        "https://api.example.com",
        "https://docs.example.com",
        "http://127.0.0.1:8080",
    ]
    .iter()
    .filter_map(|o| o.parse().ok())
    .collect();
    granted.network = vec![
        "127.0.0.1:5432".parse().unwrap(),
        "127.0.0.1:6379".parse().unwrap(),
    ];
    granted
}

fn chain() -> ScopeChain {
    let scope = |dirs: &[&str], http: &[&str], env: &[&str]| Scope {
        dirs: Some(dirs.iter().map(PathBuf::from).collect()),
        write: Some(true),
        http: Some(http.iter().map(|s| s.to_string()).collect()),
        network: Some(vec!["127.0.0.1:5432".into()]),
        env: Some(env.iter().map(|s| s.to_string()).collect()),
        tools: Some(vec!["notes__*".into(), "search".into()]),
    };
    vec![
        (
            "run-3".into(),
            scope(
                &["/srv/docs/drafts"],
                &["https://api.example.com"],
                &["API_KEY"],
            ),
        ),
        (
            "run-2".into(),
            scope(
                &["/srv/docs"],
                &["https://api.example.com", "https://docs.example.com"],
                &["API_KEY", "REGION"],
            ),
        ),
        (
            "run-1".into(),
            scope(
                &["/srv"],
                &["https://api.example.com", "https://docs.example.com"],
                &["API_KEY", "REGION", "HOME"],
            ),
        ),
    ]
}

fn authority(c: &mut Criterion) {
    let plugin = Arc::new(granted());
    let chain = chain();
    let mut group = c.benchmark_group("authority");
    let none: ScopeChain = Vec::new();
    group.bench_function("narrow-none", |b| {
        b.iter(|| {
            // A call with no scope over it shares its plugin's grants.
            if black_box(&none).is_empty() {
                black_box(plugin.clone());
            }
        })
    });
    group.bench_function("narrow-3-scopes", |b| {
        b.iter(|| black_box(plugin.narrowed(black_box(&chain))))
    });
    let policy = EntryPolicy::of_entry_config(&serde_json::json!({
        "approve": { "*": "allow", "delete_*": "ask", "*_secret": "deny" }
    }))
    .expect("a policy")
    .expect("one");
    group.bench_function("tool-in-3-scopes", |b| {
        b.iter(|| {
            black_box(
                chain
                    .iter()
                    .all(|(_, s)| s.allows_tool(black_box("notes__delete_note"))),
            )
        })
    });
    group.bench_function("approve-policy", |b| {
        b.iter(|| black_box(policy.for_tool(black_box("notes__delete_note"))))
    });
    group.finish();
}

criterion_group!(benches, authority);
criterion_main!(benches);
