//! Percentiles of full runs, each timed on its own: criterion reports a median of batch means,
//! which hides the tail. 10,000 runs per provider after 1,000 unmeasured ones.

use std::time::Instant;

use seam_bench::{host, on_worker, one_run, options, percentiles, request, runtime, write_result};
use seam_bench::{MOCK, NATIVE};

const WARMUP: usize = 1_000;
const RUNS: usize = 10_000;

fn main() {
    let rt = runtime();
    let host = rt.block_on(host(options(1000), "", 1000));
    let mut results = serde_json::Map::new();
    // `SEAM_BENCH_ONLY=seam` skips the native runs (for a profile of the component's alone).
    let only = std::env::var("SEAM_BENCH_ONLY").ok();
    for (label, provider) in [("seam", MOCK), ("native", NATIVE)] {
        if only.as_deref().is_some_and(|o| o != label) {
            continue;
        }
        let host = host.clone();
        let stats = on_worker(&rt, async move {
            let req = request();
            for _ in 0..WARMUP {
                one_run(&host, provider, req.clone()).await;
            }
            let mut samples = Vec::with_capacity(RUNS);
            for _ in 0..RUNS {
                let req = req.clone();
                let t = Instant::now();
                one_run(&host, provider, req).await;
                samples.push(t.elapsed());
            }
            percentiles(&mut samples)
        });
        eprintln!("latency {label}: {stats}");
        results.insert(label.into(), stats);
    }
    rt.block_on(host.unload_all());
    write_result("latency", &results.into());
}
