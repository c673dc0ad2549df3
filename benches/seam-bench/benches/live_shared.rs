//! 10,000 live runs at once on shared instances (`share_instance = 1000`: ten instances of the
//! async provider, `seam:plugin@0.5.0`), each waiting in the guest for its cancel or a message:
//! the memory one live run adds when runs share an instance, beside `live`'s instance per run.
//!
//! A process of its own, so that VmHWM is this benchmark's alone.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use seam_bench::write_result;
use seam_bench::{guest_dir, on_worker, options, proc_status_kib, runtime, smaps_rollup_kib};
use seam_host::subagent::{Provider, RunContext, RunFailure};
use seam_host::{
    Config, Host, ParentRef, ProviderDescriptor, StartRequest, StopReason, SubagentResult,
};

/// The floor: a provider written in Rust, in-process, whose run waits for its cancel as the
/// async provider's `wait` does. What a live run costs the host with no component at all.
struct Waiter;

impl Provider for Waiter {
    fn run(
        &self,
        ctx: RunContext,
        _request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        Box::pin(async move {
            ctx.ready();
            ctx.cancelled().await;
            Ok(SubagentResult::text(StopReason::Aborted, "cancelled"))
        })
    }
}

/// Live runs by default; `SEAM_BENCH_LIVE` sets another count.
const LIVE_DEFAULT: usize = 10_000;
/// Runs one instance serves at once.
const PER_INSTANCE: usize = 1_000;

fn main() {
    let live = std::env::var("SEAM_BENCH_LIVE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LIVE_DEFAULT);
    let rt = runtime();
    let host = rt.block_on(async move {
        let host = Host::new(options(64)).expect("the bench host starts");
        let config = Config::parse(
            &format!(
                "[[plugin]]\nid = \"shared\"\ncomponent = \"async_provider.wasm\"\n\
                 config = {{ name = \"shared\", share_instance = {PER_INSTANCE} }}\n\
                 limits = {{ max_concurrent_runs = 100000, host_memory_mb = 4096 }}\n"
            ),
            Path::new("bench.toml"),
            &guest_dir(),
        )
        .expect("the bench config parses");
        let report = host.load(&config).await;
        assert!(report.is_ok(), "{}", report.failures());
        let waiter = ProviderDescriptor {
            name: "waiter".into(),
            capabilities: Default::default(),
            features: Default::default(),
            inherits_parent_context: false,
        };
        host.register_provider(waiter, Arc::new(Waiter))
            .await
            .expect("the floor registers");
        host
    });
    // `SEAM_BENCH_FLOOR=1` measures the in-process floor instead.
    let provider = match std::env::var("SEAM_BENCH_FLOOR") {
        Ok(v) if v == "1" => "waiter",
        _ => "shared",
    };
    let stats = on_worker(&rt, async move {
        let request = StartRequest::new("wait", ParentRef::top_level("bench", "/work"));
        // One run first, so that the first instance and lazily built host state are not
        // counted per run.
        let warm = host
            .subagents()
            .start(provider, request.clone())
            .expect("starts");
        warm.started().await.expect("ready");
        warm.dispose().await;
        let base_rss = proc_status_kib("VmRSS").unwrap_or(0);
        let base_pss = smaps_rollup_kib("Pss").unwrap_or(0);

        let t = Instant::now();
        let runs: Vec<_> = (0..live)
            .map(|_| {
                host.subagents()
                    .start(provider, request.clone())
                    .expect("starts")
            })
            .collect();
        for r in futures::future::join_all(runs.iter().map(|r| r.started())).await {
            r.expect("every run becomes ready");
        }
        let start_secs = t.elapsed().as_secs_f64();
        let live_runs = host.live_runs();
        let live_instances = host.live_instances();
        let live_rss = proc_status_kib("VmRSS").unwrap_or(0);
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
            "per_instance": PER_INSTANCE,
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
    eprintln!("live_shared ({provider}): {stats}");
    if provider == "waiter" {
        write_result("live_floor", &stats);
    } else if live == LIVE_DEFAULT {
        write_result("live_shared", &stats);
    } else {
        write_result(&format!("live_shared-{live}"), &stats);
    }
}
