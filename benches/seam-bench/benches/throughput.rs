//! Runs per second with N callers at once (1, 2, 16, 256), each starting its next run as soon as
//! the previous one is disposed, for a fixed time on the multi-threaded runtime.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seam_bench::{host, on_worker, one_run, options, request, runtime, write_result};
use seam_bench::{MOCK, NATIVE};

const CALLERS: &[usize] = &[1, 2, 16, 256];
const WARMUP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);

/// Runs `callers` loops on `provider` for `time`; returns the runs completed and the time taken.
async fn burst(
    host: &seam_host::Host,
    provider: &'static str,
    callers: usize,
    time: Duration,
) -> (u64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let host = host.clone();
            let stop = stop.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let req = request();
                while !stop.load(Ordering::Relaxed) {
                    one_run(&host, provider, req.clone()).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(time).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a caller panicked");
    }
    (done.load(Ordering::Relaxed), start.elapsed())
}

/// The caller counts to measure: `CALLERS`, or those listed in `SEAM_BENCH_CALLERS` ("1,16").
fn callers() -> Vec<usize> {
    match std::env::var("SEAM_BENCH_CALLERS") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) => CALLERS.to_vec(),
    }
}

fn main() {
    let rt = runtime();
    // Room for every caller's run at once: the pool and the provider's concurrency cap.
    let host = rt.block_on(host(options(1000), "", 1000));
    let mut results = serde_json::Map::new();
    for (label, provider) in [("seam", MOCK), ("native", NATIVE)] {
        let mut rows = serde_json::Map::new();
        for callers in callers() {
            let host = host.clone();
            let (runs, elapsed) = on_worker(&rt, async move {
                burst(&host, provider, callers, WARMUP).await;
                burst(&host, provider, callers, MEASURE).await
            });
            let rate = runs as f64 / elapsed.as_secs_f64();
            eprintln!("throughput {label} x{callers}: {rate:.0} runs/s ({runs} runs)");
            rows.insert(
                callers.to_string(),
                serde_json::json!({ "runs": runs, "secs": elapsed.as_secs_f64(), "runs_per_sec": rate }),
            );
        }
        results.insert(label.into(), rows.into());
    }
    rt.block_on(host.unload_all());
    write_result("throughput", &results.into());
}
