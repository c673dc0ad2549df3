//! Cold start: a new host loading the example config (`examples/seam.toml`: the mock provider
//! twice and the subagent tool twice), with an empty compile cache (every component compiled)
//! and with a warm one (every component deserialized from the cache). The time covers
//! `Host::new` (engine, pool reservation, linkers, epoch thread), reading the config and
//! loading every entry (compile or deserialize, link, describe or bind in a throwaway
//! instance, register, mount).

use std::time::{Duration, Instant};

use seam_bench::{repo, runtime, write_result};
use seam_host::{Config, EngineOptions, Host, HostOptions};

const COLD: usize = 3;
const WARM: usize = 20;

/// One start: (host creation, config load) times.
fn start(rt: &tokio::runtime::Runtime, cache: &std::path::Path) -> (Duration, Duration) {
    let example = repo().join("examples/seam.toml");
    rt.block_on(async {
        let t = Instant::now();
        let host = Host::new(HostOptions {
            engine: EngineOptions {
                cache_dir: Some(cache.to_path_buf()),
                ..EngineOptions::default()
            },
            ..HostOptions::default()
        })
        .expect("the host starts");
        let host_new = t.elapsed();
        let config = Config::from_file(&example).expect("the example config parses");
        let report = host.load(&config).await;
        let total = t.elapsed();
        assert!(
            report.is_ok(),
            "the example config loads: {:?}",
            report.failed
        );
        host.unload_all().await;
        (host_new, total - host_new)
    })
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn summary(samples: Vec<(Duration, Duration)>) -> serde_json::Value {
    let total: Vec<Duration> = samples.iter().map(|(a, b)| *a + *b).collect();
    serde_json::json!({
        "n": samples.len(),
        "host_new_ms": median(samples.iter().map(|s| s.0).collect()),
        "load_ms": median(samples.iter().map(|s| s.1).collect()),
        "total_ms": median(total.clone()),
        "max_total_ms": total.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    })
}

fn main() {
    let rt = runtime();
    let mut cold = Vec::new();
    for _ in 0..COLD {
        let dir = tempfile::tempdir().expect("a temp dir");
        cold.push(start(&rt, dir.path()));
    }
    let warm_dir = tempfile::tempdir().expect("a temp dir");
    start(&rt, warm_dir.path()); // fills the cache
    let warm: Vec<_> = (0..WARM).map(|_| start(&rt, warm_dir.path())).collect();
    let results = serde_json::json!({ "cold": summary(cold), "warm": summary(warm) });
    eprintln!("cold start: {results}");
    write_result("cold_start", &results);
}
