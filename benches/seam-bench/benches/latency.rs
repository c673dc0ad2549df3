//! Percentiles of full runs, each timed on its own: criterion reports a median of batch means,
//! which hides the tail. 10,000 runs per provider after 1,000 unmeasured ones, and as many of
//! the component run's floor: wasmtime alone on Seam's engine settings, instantiate + the
//! mock's `run` + drop (`seam_bench::floor`), in the same process so that Seam ÷ it is from
//! one run. The rows take turns, a call each, so that a busy moment of the machine lands on
//! all of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use seam_bench::{
    host, mock_floor, on_worker, one_run, options, percentiles, request, runtime, write_result,
};
use seam_bench::{MOCK, NATIVE};

const WARMUP: usize = 1_000;
const RUNS: usize = 10_000;

/// One row's calls: each makes one sample.
type Call = Box<dyn FnMut() -> futures::future::BoxFuture<'static, ()> + Send>;

/// Times `RUNS` calls of each row one by one after `WARMUP` unmeasured ones, the rows taking
/// turns (a call of each, in an order that rotates), so that whatever else the machine does
/// falls on every row alike and the ratios between rows hold within one run.
async fn sample(rows: &mut [(&'static str, Call)]) -> Vec<(&'static str, serde_json::Value)> {
    for (_, call) in rows.iter_mut() {
        for _ in 0..WARMUP {
            call().await;
        }
    }
    let mut samples: Vec<Vec<Duration>> = rows.iter().map(|_| Vec::with_capacity(RUNS)).collect();
    for i in 0..RUNS {
        for k in 0..rows.len() {
            let row = (i + k) % rows.len();
            let t = Instant::now();
            (rows[row].1)().await;
            samples[row].push(t.elapsed());
        }
    }
    rows.iter()
        .zip(samples.iter_mut())
        .map(|((label, _), samples)| (*label, percentiles(samples)))
        .collect()
}

fn main() {
    let rt = runtime();
    let host = rt.block_on(host(options(1000), "", 1000));
    let floor = Arc::new(rt.block_on(mock_floor(&host, &options(1000))));
    // `SEAM_BENCH_ONLY=seam` keeps one row (for a profile of the component's alone).
    let only = std::env::var("SEAM_BENCH_ONLY").ok();
    let mut rows: Vec<(&'static str, Call)> = Vec::new();
    for label in ["seam", "native", "wasmtime_floor"] {
        if only.as_deref().is_some_and(|o| o != label) {
            continue;
        }
        let call: Call = match label {
            "wasmtime_floor" => {
                let floor = floor.clone();
                Box::new(move || {
                    let floor = floor.clone();
                    Box::pin(async move { floor.run().await })
                })
            }
            _ => {
                let provider = if label == "seam" { MOCK } else { NATIVE };
                let host = host.clone();
                let req = request();
                Box::new(move || {
                    let host = host.clone();
                    let req = req.clone();
                    Box::pin(async move { one_run(&host, provider, req).await })
                })
            }
        };
        rows.push((label, call));
    }
    let stats = on_worker(&rt, async move { sample(&mut rows).await });
    let mut results = serde_json::Map::new();
    for (label, stats) in stats {
        eprintln!("latency {label}: {stats}");
        results.insert(label.into(), stats);
    }
    drop(floor);
    rt.block_on(host.unload_all());
    write_result("latency", &results.into());
}
