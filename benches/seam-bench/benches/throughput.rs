//! Runs per second with N callers at once (1, 2, 16, 256), each starting its next run as soon as
//! the previous one is disposed, for a fixed time on the multi-threaded runtime: Seam's mock
//! component, the native provider, and wasmtime alone doing what a run's instance does
//! (`seam_bench::floor`: a fresh store, instantiate, `run`, drop), the ceiling of a component
//! run on this machine's cores.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seam_bench::floor::Floor;
use seam_bench::{host, mock_floor, on_worker, one_run, options, request, runtime, write_result};
use seam_bench::{MOCK, NATIVE};

const CALLERS: &[usize] = &[1, 2, 16, 256];
const WARMUP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);

/// What a caller runs: a provider of the host, or wasmtime alone.
#[derive(Clone)]
enum Runs {
    Provider(seam_host::Host, &'static str),
    Floor(Arc<Floor>),
}

impl Runs {
    async fn one(&self, req: &seam_host::StartRequest) {
        match self {
            Self::Provider(host, provider) => one_run(host, provider, req.clone()).await,
            Self::Floor(floor) => floor.run().await,
        }
    }
}

/// Runs `callers` loops of `runs` for `time`; returns the runs completed and the time taken.
async fn burst(runs: &Runs, callers: usize, time: Duration) -> (u64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let runs = runs.clone();
            let stop = stop.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let req = request();
                while !stop.load(Ordering::Relaxed) {
                    runs.one(&req).await;
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
    let floor = Arc::new(rt.block_on(mock_floor(&host, &options(1000))));
    let mut results = serde_json::Map::new();
    for (label, subject) in [
        ("seam", Runs::Provider(host.clone(), MOCK)),
        ("native", Runs::Provider(host.clone(), NATIVE)),
        ("wasmtime_floor", Runs::Floor(floor.clone())),
    ] {
        let mut rows = serde_json::Map::new();
        for callers in callers() {
            let subject = subject.clone();
            let (runs, elapsed) = on_worker(&rt, async move {
                burst(&subject, callers, WARMUP).await;
                burst(&subject, callers, MEASURE).await
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
    drop(floor);
    rt.block_on(host.unload_all());
    write_result("throughput", &results.into());
}
