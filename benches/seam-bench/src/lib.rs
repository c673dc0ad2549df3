//! Shared setup of Seam's benchmarks: where things are, the hosts under test, one full run, the
//! native provider that is the floor, percentiles, and the result files the report reads.
//!
//! Every benchmark writes what criterion does not keep (percentiles, rates, memory, load times)
//! as JSON into `target/seam-bench/`; `seam-bench-report` turns those and criterion's
//! `estimates.json` files into the Markdown table of `BENCHMARKS.md`.

/// The allocator the `seam` binary uses, so that the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod floor;

use futures::future::BoxFuture;
use seam_host::{
    Config, EngineOptions, Host, HostOptions, ParentRef, Provider, ProviderDescriptor, RunContext,
    RunFailure, StartRequest, StopReason, SubagentResult,
};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Folder of the built guest components (`make guests`).
pub fn guest_dir() -> PathBuf {
    repo().join("target/guests/wasm32-wasip2/release")
}

/// Path of a built guest component, by crate name with underscores.
pub fn guest(name: &str) -> PathBuf {
    guest_dir().join(format!("{name}.wasm"))
}

/// Where the benchmarks write their results.
pub fn out_dir() -> PathBuf {
    repo().join("target/seam-bench")
}

/// Writes one benchmark's results as `target/seam-bench/{name}.json`, with the load average
/// when it ended (other work on the machine skews the figures).
pub fn write_result(name: &str, value: &serde_json::Value) {
    let mut value = value.clone();
    if let (Some(map), Ok(load)) = (
        value.as_object_mut(),
        std::fs::read_to_string("/proc/loadavg"),
    ) {
        map.insert("loadavg".into(), load.trim().into());
    }
    let value = &value;
    let dir = out_dir();
    std::fs::create_dir_all(&dir).expect("cannot create target/seam-bench");
    let path = dir.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).expect("results serialise");
    std::fs::write(&path, text).expect("cannot write a result file");
    eprintln!("wrote {}", path.display());
}

/// Name of the mock provider component under test.
pub const MOCK: &str = "mock";
/// Name of the native provider, the floor.
pub const NATIVE: &str = "native";
/// The reply template both providers fill in.
pub const REPLY: &str = "Notes on {prompt} for {parent} at depth {depth}";

/// Host options for benchmarks: a compile cache under `target/`, room for `instances` live
/// instances in the pool.
pub fn options(instances: u32) -> HostOptions {
    // For profiling under valgrind, which cannot reserve the address space of a full pool.
    let instances = std::env::var("SEAM_BENCH_POOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(instances);
    HostOptions {
        engine: EngineOptions {
            cache_dir: Some(repo().join("target/seam-bench-cache")),
            pool_instances: instances,
            ..EngineOptions::default()
        },
        ..HostOptions::default()
    }
}

/// The mock provider's config entry; `extra` adds keys to its component config.
pub fn mock_entry(extra: &str, max_concurrent_runs: usize) -> String {
    format!(
        "[[plugin]]\nid = \"{MOCK}\"\ncomponent = \"mock_provider.wasm\"\n\
         config = {{ name = \"{MOCK}\", reply = \"{REPLY}\"{extra} }}\n\
         limits = {{ max_concurrent_runs = {max_concurrent_runs} }}\n"
    )
}

/// A host with the mock component (`extra` added to its config) and the native provider.
pub async fn host(options: HostOptions, extra: &str, max_concurrent_runs: usize) -> Host {
    host_with(options, extra, max_concurrent_runs, "").await
}

/// An observer entry that never returns from its first delivery (it sleeps on its clock), for
/// measuring whether runs wait for observers.
pub const STUCK_OBSERVER: &str =
    "[[plugin]]\nid = \"stuck\"\ncomponent = \"observer_probe.wasm\"\n\
     config = { mode = \"sleep\" }\n";

/// Like [`host`], with more config entries after the mock's.
pub async fn host_with(
    options: HostOptions,
    extra: &str,
    max_concurrent_runs: usize,
    entries: &str,
) -> Host {
    load(
        Host::new(options).expect("the bench host starts"),
        extra,
        max_concurrent_runs,
        entries,
    )
    .await
}

/// Like [`host`], keeping its sessions, runs and journal in `store`.
pub async fn host_with_store(
    options: HostOptions,
    store: Arc<dyn seam_host::session_store::SessionStore>,
) -> Host {
    let host = Host::with_store(options, store).expect("the bench host starts");
    load(host, "", 1000, "").await
}

/// Loads the mock (with `extra` config keys) and `entries` into `host`, and registers the
/// native floor.
async fn load(host: Host, extra: &str, max_concurrent_runs: usize, entries: &str) -> Host {
    let config = Config::parse(
        &(mock_entry(extra, max_concurrent_runs) + "\n" + entries),
        Path::new("bench.toml"),
        &guest_dir(),
    )
    .expect("the bench config parses");
    let report = host.load(&config).await;
    assert!(
        report.is_ok(),
        "loading the mock provider failed (run `make guests`): {:?}",
        report.failed
    );
    host.register_provider(NativeMock::descriptor(), Arc::new(NativeMock::new(REPLY)))
        .await
        .expect("the native provider registers");
    host
}

/// The request every benchmarked run gets.
pub fn request() -> StartRequest {
    StartRequest::new("the sources", ParentRef::top_level("bench", "/work"))
}

/// The mock entry's component config as the host passes it to `run`: its JSON text.
pub fn mock_config() -> String {
    serde_json::json!({ "name": MOCK, "reply": REPLY }).to_string()
}

/// The floor of a full mock run: wasmtime alone on an engine set up as `options` set up the
/// host's, running the mock component's `run` with [`request`], [`mock_config`] and a run id
/// that `host` minted for a real run of the mock.
pub async fn mock_floor(host: &Host, options: &HostOptions) -> floor::Floor {
    let run = host
        .subagents()
        .start(MOCK, request())
        .expect("the run starts");
    let run_id = run.id().to_string();
    run.result().await.expect("the run settles");
    run.dispose().await;
    floor::Floor::new(
        &options.engine,
        &guest("mock_provider"),
        &mock_config(),
        &run_id,
        &request(),
    )
}

/// One full run on `provider`: start, readiness, result, dispose.
pub async fn one_run(host: &Host, provider: &str, request: StartRequest) {
    let run = host
        .subagents()
        .start(provider, request)
        .expect("the run starts");
    run.started().await.expect("the run becomes ready");
    let result = run.result().await.expect("the run settles");
    debug_assert_eq!(result.stop_reason, StopReason::Completed);
    std::hint::black_box(result);
    run.dispose().await;
}

/// Times `iters` full runs of `provider` on `host`, one after another, on a worker thread: the
/// body of the per-run benchmarks' `iter_custom`.
pub fn time_runs(
    rt: &tokio::runtime::Runtime,
    host: &Host,
    provider: &'static str,
    iters: u64,
) -> Duration {
    let host = host.clone();
    on_worker(rt, async move {
        let req = request();
        let t = Instant::now();
        for _ in 0..iters {
            one_run(&host, provider, req.clone()).await;
        }
        t.elapsed()
    })
}

/// The mock provider's task written in Rust, registered in-process: the floor a component run
/// is compared with. It does what the mock component does for one run (log a debug line,
/// declare readiness, fill the reply template), holding its parsed config as a native provider
/// would.
pub struct NativeMock {
    reply: Arc<str>,
}

impl NativeMock {
    /// A native mock with this reply template.
    pub fn new(reply: &str) -> Self {
        Self {
            reply: reply.into(),
        }
    }

    /// Its descriptor: like the mock component's with no capabilities.
    pub fn descriptor() -> ProviderDescriptor {
        ProviderDescriptor {
            name: NATIVE.into(),
            capabilities: Default::default(),
            features: Default::default(),
            inherits_parent_context: false,
        }
    }
}

impl Provider for NativeMock {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let reply = self.reply.clone();
        Box::pin(async move {
            tracing::debug!(
                "native provider: run `{}` for parent `{}` at depth {}",
                ctx.id(),
                request.parent.id,
                request.parent.depth
            );
            ctx.ready();
            let prompt = seam_host::blocks_text(&request.prompt);
            let text = reply
                .replace("{prompt}", &prompt)
                .replace("{parent}", &request.parent.id)
                .replace("{depth}", &request.parent.depth.to_string());
            Ok(SubagentResult::text(StopReason::Completed, text))
        })
    }
}

/// Live runs a memory benchmark holds by default (reported in the tables).
pub const LIVE_DEFAULT: usize = 10_000;

/// Live runs a memory benchmark holds: [`LIVE_DEFAULT`], or the count `SEAM_BENCH_LIVE` sets.
pub fn live_count() -> usize {
    std::env::var("SEAM_BENCH_LIVE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LIVE_DEFAULT)
}

/// The runtime the benchmarks run in: multi-threaded, one worker per core, as the `seam` CLI.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

/// Runs `fut` on a worker thread of `rt` (not on the blocking caller), so that the tasks it
/// spawns start on the same worker as a real caller's would.
pub fn on_worker<F>(rt: &tokio::runtime::Runtime, fut: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(rt.spawn(fut))
        .expect("the benchmark task panicked")
}

/// Percentiles of individually timed samples, in nanoseconds.
pub fn percentiles(samples: &mut [Duration]) -> serde_json::Value {
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_nanos() as u64
    };
    let mean = samples.iter().map(|d| d.as_nanos()).sum::<u128>() / samples.len().max(1) as u128;
    serde_json::json!({
        "n": samples.len(),
        "min_ns": at(0.0),
        "p50_ns": at(0.5),
        "p90_ns": at(0.9),
        "p99_ns": at(0.99),
        "p999_ns": at(0.999),
        "max_ns": at(1.0),
        "mean_ns": mean as u64,
    })
}

/// Times `f` once.
pub async fn timed<F: std::future::Future>(f: F) -> (Duration, F::Output) {
    let t = Instant::now();
    let out = f.await;
    (t.elapsed(), out)
}

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`), where there is one.
/// A field of `/proc/self/smaps_rollup` in KiB (`Pss`: resident memory with each shared page
/// divided among the mappings that share it).
pub fn smaps_rollup_kib(field: &str) -> Option<u64> {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    rollup.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

pub fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Holds `live` runs of `provider` live at once (each must stay blocked until it is disposed),
/// after one warm-up run so that lazily built host state is not counted per run, and reports
/// the process's memory with them live and after they are disposed: what the `live` and
/// `live_shared` benchmarks write. `SEAM_BENCH_SMAPS=FILE` copies `/proc/self/smaps` there while
/// they are live, for profiling.
pub async fn hold_live(
    host: &Host,
    provider: &str,
    request: StartRequest,
    live: usize,
) -> serde_json::Value {
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
    // RSS counts the memory image's clean pages once per instance mapping them; PSS divides
    // them among the instances, so it is what a live run really costs.
    let live_pss = smaps_rollup_kib("Pss").unwrap_or(0);
    if let Some(path) = std::env::var_os("SEAM_BENCH_SMAPS") {
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
}
