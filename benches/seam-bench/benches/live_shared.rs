//! 10,000 live runs at once on shared instances (`share_instance = 1000`: ten instances of the
//! async provider, `seam:plugin@0.5.0`), each waiting in the guest for its cancel or a message:
//! the memory one live run adds when runs share an instance, beside `live`'s instance per run.
//!
//! A process of its own, so that VmHWM is this benchmark's alone.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use seam_bench::write_result;
use seam_bench::{guest_dir, hold_live, on_worker, options, runtime};
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

/// Runs one instance serves at once.
const PER_INSTANCE: usize = 1_000;

fn main() {
    let live = seam_bench::live_count();
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
        let mut stats = hold_live(&host, provider, request, live).await;
        stats["per_instance"] = PER_INSTANCE.into();
        stats
    });
    eprintln!("live_shared ({provider}): {stats}");
    if provider == "waiter" {
        write_result("live_floor", &stats);
    } else if live == seam_bench::LIVE_DEFAULT {
        write_result("live_shared", &stats);
    } else {
        write_result(&format!("live_shared-{live}"), &stats);
    }
}
