//! Percentiles of full runs, each timed on its own: criterion reports a median of batch means,
//! which hides the tail. 10,000 runs per provider after 1,000 unmeasured ones, and as many of
//! the component run's floor: wasmtime alone on Seam's engine settings, instantiate + the
//! mock's `run` + drop (`seam_bench::floor`), in the same process so that Seam ÷ it is from
//! one run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use seam_bench::{
    host, mock_floor, on_worker, one_run, options, percentiles, request, runtime, write_result,
};
use seam_bench::{MOCK, NATIVE};

const WARMUP: usize = 1_000;
const RUNS: usize = 10_000;

/// Times `RUNS` calls of `f` one by one after `WARMUP` unmeasured ones.
async fn sample<F, Fut>(mut f: F) -> serde_json::Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARMUP {
        f().await;
    }
    let mut samples: Vec<Duration> = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    percentiles(&mut samples)
}

fn main() {
    let rt = runtime();
    let host = rt.block_on(host(options(1000), "", 1000));
    let floor = Arc::new(rt.block_on(mock_floor(&host, &options(1000))));
    let mut results = serde_json::Map::new();
    // `SEAM_BENCH_ONLY=seam` skips the others (for a profile of the component's alone).
    let only = std::env::var("SEAM_BENCH_ONLY").ok();
    for label in ["seam", "native", "wasmtime_floor"] {
        if only.as_deref().is_some_and(|o| o != label) {
            continue;
        }
        let host = host.clone();
        let floor = floor.clone();
        let stats = on_worker(&rt, async move {
            match label {
                "wasmtime_floor" => sample(|| floor.run()).await,
                _ => {
                    let provider = if label == "seam" { MOCK } else { NATIVE };
                    let req = request();
                    sample(|| one_run(&host, provider, req.clone())).await
                }
            }
        });
        eprintln!("latency {label}: {stats}");
        results.insert(label.into(), stats);
    }
    drop(floor);
    rt.block_on(host.unload_all());
    write_result("latency", &results.into());
}
