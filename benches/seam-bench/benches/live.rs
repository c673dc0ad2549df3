//! 10,000 runs live at once, each blocked in the host (the mock waits in `run-context.sleep`
//! after declaring readiness): the process's peak RSS and the memory one live run adds.
//!
//! A process of its own, so that VmHWM is this benchmark's alone. The engine's pool holds
//! 10,000 instances and the provider's concurrency cap is lifted for it.

use std::time::Instant;

use seam_bench::MOCK;
use seam_bench::{
    host, on_worker, options, proc_status_kib, request, runtime, smaps_rollup_kib, write_result,
};

/// Live runs by default; `SEAM_BENCH_LIVE` sets another count (the pool is sized for it).
const LIVE_DEFAULT: usize = 10_000;

fn main() {
    let live = std::env::var("SEAM_BENCH_LIVE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LIVE_DEFAULT);
    let rt = runtime();
    // A delay far longer than the benchmark: every run stays blocked until it is disposed.
    let host = rt.block_on(host(
        options(live as u32 + 100),
        ", delayMs = 600000",
        live.min(100_000),
    ));
    let stats = on_worker(&rt, async move {
        // One run first, so that lazily built host state is not counted per run.
        let warm = host.subagents().start(MOCK, request()).expect("starts");
        warm.started().await.expect("ready");
        warm.dispose().await;
        let base_rss = proc_status_kib("VmRSS").unwrap_or(0);
        let base_pss = smaps_rollup_kib("Pss").unwrap_or(0);

        let t = Instant::now();
        let req = request();
        let runs: Vec<_> = (0..live)
            .map(|_| host.subagents().start(MOCK, req.clone()).expect("starts"))
            .collect();
        for r in futures::future::join_all(runs.iter().map(|r| r.started())).await {
            r.expect("every run becomes ready");
        }
        let start_secs = t.elapsed().as_secs_f64();
        let live_runs = host.live_runs();
        let live_instances = host.live_instances();
        let live_rss = proc_status_kib("VmRSS").unwrap_or(0);
        // RSS counts the memory image's clean pages once per instance mapping them; PSS
        // divides them among the instances, so it is what a live run really costs.
        let live_pss = smaps_rollup_kib("Pss").unwrap_or(0);
        if let Some(path) = std::env::var_os("SEAM_BENCH_SMAPS") {
            // Where the memory of the live runs is, mapping by mapping, for profiling.
            let smaps = std::fs::read("/proc/self/smaps").unwrap_or_default();
            std::fs::write(path, smaps).expect("cannot write the smaps copy");
        }

        let t = Instant::now();
        futures::future::join_all(runs.iter().map(|r| r.dispose())).await;
        let dispose_secs = t.elapsed().as_secs_f64();
        let after_rss = proc_status_kib("VmRSS").unwrap_or(0);
        let hwm = proc_status_kib("VmHWM").unwrap_or(0);
        assert_eq!(host.live_runs(), 0, "every run is disposed");
        host.unload_all().await;
        serde_json::json!({
            "live": live,
            "live_runs": live_runs,
            "live_instances": live_instances,
            "base_rss_kib": base_rss,
            "live_rss_kib": live_rss,
            "after_dispose_rss_kib": after_rss,
            "peak_rss_kib": hwm,
            "per_run_kib": (live_rss.saturating_sub(base_rss)) as f64 / live as f64,
            "base_pss_kib": base_pss,
            "live_pss_kib": live_pss,
            "per_run_pss_kib": (live_pss.saturating_sub(base_pss)) as f64 / live as f64,
            "start_all_secs": start_secs,
            "dispose_all_secs": dispose_secs,
        })
    });
    eprintln!("live: {stats}");
    // A count other than the default is reported apart, so the tables keep the default's.
    if live == LIVE_DEFAULT {
        write_result("live", &stats);
    } else {
        write_result(&format!("live-{live}"), &stats);
    }
}
