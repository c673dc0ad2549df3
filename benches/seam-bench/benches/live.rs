//! 10,000 runs live at once, each blocked in the host (the mock waits in `run-context.sleep`
//! after declaring readiness): the process's peak RSS and the memory one live run adds.
//!
//! A process of its own, so that VmHWM is this benchmark's alone. The engine's pool holds
//! 10,000 instances and the provider's concurrency cap is lifted for it.

use seam_bench::MOCK;
use seam_bench::{hold_live, host, on_worker, options, request, runtime, write_result};

fn main() {
    let live = seam_bench::live_count();
    let rt = runtime();
    // A delay far longer than the benchmark: every run stays blocked until it is disposed.
    let host = rt.block_on(host(
        options(live as u32 + 100),
        ", delayMs = 600000",
        live.min(100_000),
    ));
    let stats = on_worker(
        &rt,
        async move { hold_live(&host, MOCK, request(), live).await },
    );
    eprintln!("live: {stats}");
    // A count other than the default is reported apart, so the tables keep the default's.
    if live == seam_bench::LIVE_DEFAULT {
        write_result("live", &stats);
    } else {
        write_result(&format!("live-{live}"), &stats);
    }
}
