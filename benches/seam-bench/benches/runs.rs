//! Criterion benchmarks of the per-run and per-call costs:
//!
//! - `run/seam`: a full mock-component run (start, readiness, result, dispose; a fresh store and
//!   instance per run);
//! - `run/native`: the same work by a provider written in Rust, in-process: the floor;
//! - `run/wasmtime_floor`: wasmtime alone on Seam's engine settings, doing what the run's
//!   instance does: a fresh store, instantiate, the mock's `run` with the same request, drop
//!   (`seam_bench::floor`): the floor of the component run;
//! - `run/seam_current_thread`, `run/native_current_thread`: the same two on a current-thread
//!   runtime (the others use the multi-threaded one, two workers here);
//! - `run/seam_stuck_observer`: `run/seam` with an observer component stuck in its first
//!   delivery: runs must not wait for it (its queue fills to its byte cap and drops);
//! - `call/noop`: a host-to-guest call of an export that does nothing, on a live instance;
//! - `call/describe`: the mock's `describe` (it parses its JSON config) on a live instance;
//! - `instantiate/describe`: a fresh store and instance, then `describe`, then drop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use seam_bench::{
    guest, host, mock_floor, on_worker, one_run, options, request, runtime, time_runs, MOCK, NATIVE,
};
use seam_host::probe::Template;

/// The mock's config, as `describe` gets it.
const DESCRIBE_CONFIG: &str = r#"{"name":"mock","reply":"Notes on {prompt}"}"#;

fn runs(c: &mut Criterion) {
    let rt = runtime();
    let host = rt.block_on(host(options(1000), "", 1000));
    let mut group = c.benchmark_group("run");
    for provider in [MOCK, NATIVE] {
        let name = if provider == MOCK { "seam" } else { "native" };
        group.bench_function(name, |b| {
            b.iter_custom(|iters| time_runs(&rt, &host, provider, iters))
        });
    }
    let floor = Arc::new(rt.block_on(mock_floor(&host, &options(1000))));
    group.bench_function("wasmtime_floor", |b| {
        b.iter_custom(|iters| {
            let floor = floor.clone();
            on_worker(&rt, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    floor.run().await;
                }
                t.elapsed()
            })
        })
    });
    drop(floor);
    // The same on a current-thread runtime: no second worker to steal the caller or the
    // run's driver task, so no cross-core wake-ups between them.
    let ct = current_thread();
    let host_ct = ct.block_on(seam_bench::host(options(1000), "", 1000));
    for provider in [MOCK, NATIVE] {
        let name = if provider == MOCK {
            "seam_current_thread"
        } else {
            "native_current_thread"
        };
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                ct.block_on(async {
                    let req = request();
                    let t = Instant::now();
                    for _ in 0..iters {
                        one_run(&host_ct, provider, req.clone()).await;
                    }
                    t.elapsed()
                })
            })
        });
    }
    let stuck = rt.block_on(seam_bench::host_with(
        options(1000),
        "",
        1000,
        seam_bench::STUCK_OBSERVER,
    ));
    group.bench_function("seam_stuck_observer", |b| {
        b.iter_custom(|iters| {
            let host = stuck.clone();
            on_worker(&rt, async move {
                let req = request();
                let t = Instant::now();
                for _ in 0..iters {
                    one_run(&host, MOCK, req.clone()).await;
                }
                t.elapsed()
            })
        })
    });
    group.finish();
    rt.block_on(stuck.unload_all());
    ct.block_on(host_ct.unload_all());
    rt.block_on(host.unload_all());
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

fn calls(c: &mut Criterion) {
    let rt = runtime();
    let host = rt.block_on(host(options(1000), "", 1000));
    let noop = Template::new(&host, &guest("seam_probe")).expect("the probe links");
    let mock = Template::new(&host, &guest("mock_provider")).expect("the mock links");

    let mut group = c.benchmark_group("call");
    let mut probe = rt.block_on(noop.noop()).expect("the probe instantiates");
    group.bench_function("noop", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    probe.call().await.expect("noop");
                }
                t.elapsed()
            })
        })
    });
    let mut instance = rt.block_on(mock.provider()).expect("the mock instantiates");
    group.bench_function("describe", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    let name = instance.describe(DESCRIBE_CONFIG).await;
                    std::hint::black_box(name.expect("describe"));
                }
                t.elapsed()
            })
        })
    });
    group.finish();
    drop((probe, instance));

    let mut group = c.benchmark_group("instantiate");
    group.bench_function("describe", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    let mut instance = mock.provider().await.expect("instantiate");
                    let name = instance.describe(DESCRIBE_CONFIG).await;
                    std::hint::black_box(name.expect("describe"));
                }
                t.elapsed()
            })
        })
    });
    group.finish();
    drop((noop, mock));
    rt.block_on(host.unload_all());
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
}

criterion_group! {
    name = benches;
    config = config();
    targets = runs, calls
}
criterion_main!(benches);
