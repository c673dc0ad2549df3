//! The Extism peer's benchmarks, beside Seam's (same criterion home, same result folder):
//!
//! - `run/extism`: instantiate + call + drop of the mock provider's task as an Extism plugin;
//! - `call/extism_noop`: a call of an export that does nothing, on a live plugin instance;
//! - `target/seam-bench/extism-latency.json`: percentiles of 10,000 individually timed runs.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use extism::Plugin;
use extism_peer::{compile, one_run, repo, Request};

const WARMUP: usize = 1_000;
const RUNS: usize = 10_000;

fn runs(c: &mut Criterion) {
    let compiled = compile();
    let request = Request::bench();
    let result = one_run(&compiled, &request);
    assert_eq!(result.stop_reason, "completed");
    assert_eq!(result.output, "Notes on the sources for bench at depth 0");

    c.benchmark_group("run").bench_function("extism", |b| {
        b.iter(|| std::hint::black_box(one_run(&compiled, &request)))
    });

    let mut plugin = Plugin::new_from_compiled(&compiled).expect("the plugin instantiates");
    c.benchmark_group("call")
        .bench_function("extism_noop", |b| {
            b.iter(|| plugin.call::<(), ()>("noop", ()).expect("noop"))
        });

    percentiles(&compiled, &request);
}

/// Times 10,000 runs one by one and writes their percentiles.
fn percentiles(compiled: &extism::CompiledPlugin, request: &Request) {
    for _ in 0..WARMUP {
        std::hint::black_box(one_run(compiled, request));
    }
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(one_run(compiled, request));
            t.elapsed()
        })
        .collect();
    samples.sort_unstable();
    let at =
        |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_nanos() as u64;
    let mean = samples.iter().map(|d| d.as_nanos()).sum::<u128>() / samples.len() as u128;
    let stats = serde_json::json!({ "extism": {
        "n": samples.len(),
        "min_ns": at(0.0),
        "p50_ns": at(0.5),
        "p90_ns": at(0.9),
        "p99_ns": at(0.99),
        "p999_ns": at(0.999),
        "max_ns": at(1.0),
        "mean_ns": mean as u64,
    }});
    eprintln!("latency extism: {stats}");
    let dir = repo().join("target/seam-bench");
    std::fs::create_dir_all(&dir).expect("cannot create target/seam-bench");
    let text = serde_json::to_string_pretty(&stats).expect("results serialise");
    std::fs::write(dir.join("extism-latency.json"), text).expect("cannot write the results");
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
}

criterion_group! {
    name = benches;
    config = config();
    targets = runs
}
criterion_main!(benches);
