//! Real guests, not only the 60 KB mock: the same provider (a reply template and a cancellable
//! delay) as the plugin kit's templates build it in Python (componentize-py) and JavaScript
//! (componentize-js), beside the Rust mock. For each:
//!
//! - *first load*: `Host::load` of one entry with an empty compile cache (Cranelift compiles
//!   the component), and *cached load*: the same with the artifact in the cache;
//! - *instantiate*: a fresh store and instance made as a run's are, `describe`, drop;
//! - *full run*: start, readiness, result, dispose, as `run/seam` for the mock;
//! - *per live run*: RSS and PSS added by each of [`LIVE`] runs blocked in `run-context.sleep`;
//! - *the floor*: the same instantiate + `describe` + drop with wasmtime alone, as
//!   `wasmtime run` would do it: a fresh `Store` with an empty WASI context, the WASI linker and
//!   every other import a trap, on wasmtime's default engine (on-demand allocation) and on its
//!   default pooling allocator. What Seam adds over these is the host's share.
//!
//! The Python and JavaScript components come from `make bench-guests`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seam_bench::{
    guest, one_run, percentiles, proc_status_kib, repo, request, runtime, smaps_rollup_kib,
    write_result,
};
use seam_host::probe::Template;
use seam_host::{Config, EngineOptions, Host, HostOptions};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    Component, Instance, InstancePre, Linker, ResourceTable, ResourceType, Val,
};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Runs kept live at once for the memory figure.
const LIVE: usize = 200;
/// The config every guest gets (each reads `name`, `reply` and `delayMs`).
const CONFIG: &str = r#"{"name":"g","reply":"Notes on {prompt}"}"#;

struct Guest {
    key: &'static str,
    path: PathBuf,
    /// Samples of the per-run figures; the large guests take milliseconds each.
    samples: usize,
    /// First loads measured (each compiles the whole component).
    cold_loads: usize,
}

fn guests() -> Vec<Guest> {
    let kit = |name: &str| {
        repo()
            .join("target/bench-guests")
            .join(name)
            .join(format!("{name}.wasm"))
    };
    vec![
        Guest {
            key: "rust",
            path: guest("mock_provider"),
            samples: 2000,
            cold_loads: 3,
        },
        Guest {
            key: "python",
            path: kit("py-bench"),
            samples: 300,
            cold_loads: 1,
        },
        Guest {
            key: "js",
            path: kit("js-bench"),
            samples: 300,
            cold_loads: 1,
        },
    ]
}

fn options(cache: &Path, instances: u32) -> HostOptions {
    HostOptions {
        engine: EngineOptions {
            cache_dir: Some(cache.to_path_buf()),
            pool_instances: instances,
            // Cranelift's first loads and cached loads; `tiering` measures Winch first.
            compiler: seam_host::engine::Compiler::Cranelift,
            ..EngineOptions::default()
        },
        ..HostOptions::default()
    }
}

/// The guest's entries: `g` for runs, `g-live` for runs that wait in `sleep` until disposed.
fn entries(path: &Path) -> String {
    let component = path.display();
    format!(
        "[[plugin]]\nid = \"g\"\ncomponent = \"{component}\"\n\
         config = {{ name = \"g\", reply = \"Notes on {{prompt}}\" }}\n\n\
         [[plugin]]\nid = \"g-live\"\ncomponent = \"{component}\"\n\
         config = {{ name = \"g-live\", reply = \"late\", delayMs = 600000 }}\n\
         limits = {{ max_concurrent_runs = {LIVE} }}\n"
    )
}

async fn load(host: &Host, path: &Path) -> Duration {
    let config = Config::parse(&entries(path), Path::new("guests.toml"), &repo())
        .expect("the bench config parses");
    let t = Instant::now();
    let report = host.load(&config).await;
    let took = t.elapsed();
    assert!(report.is_ok(), "{}: {:?}", path.display(), report.failed);
    took
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_ms(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    ms(v[v.len() / 2])
}

/// Times `n` calls of `f` one by one after `n / 10` unmeasured ones.
async fn sample<F, Fut>(n: usize, mut f: F) -> serde_json::Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..n / 10 {
        f().await;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    percentiles(&mut samples)
}

/// Memory added per live run: `LIVE` runs started, all ready, then read; then disposed.
async fn live(host: &Host) -> serde_json::Value {
    let rss = || proc_status_kib("VmRSS").unwrap_or(0);
    let pss = || smaps_rollup_kib("Pss").unwrap_or(0);
    let (rss_before, pss_before) = (rss(), pss());
    let mut runs = Vec::with_capacity(LIVE);
    for _ in 0..LIVE {
        runs.push(
            host.subagents()
                .start("g-live", request())
                .expect("a live run starts"),
        );
    }
    for run in &runs {
        run.started().await.expect("a live run becomes ready");
    }
    let (rss_live, pss_live) = (rss(), pss());
    for run in runs {
        run.dispose().await;
    }
    serde_json::json!({
        "runs": LIVE,
        "rss_per_run_kib": rss_live.saturating_sub(rss_before) as f64 / LIVE as f64,
        "pss_per_run_kib": pss_live.saturating_sub(pss_before) as f64 / LIVE as f64,
    })
}

/// Store data of the wasmtime-only floor: an empty WASI context, as `wasmtime run` gives a
/// component it grants nothing.
struct Floor {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Floor {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// Defines the component's `seam:plugin` imports as functions that fail (and resources of no
/// use): `describe` calls none of them. (`define_unknown_imports_as_traps` would also shadow
/// WASI imports of a newer patch version than wasmtime-wasi defines, which semver matching
/// otherwise satisfies.)
fn stub_seam_imports(linker: &mut Linker<Floor>, engine: &Engine, component: &Component) {
    struct Stub;
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        if !name.starts_with("seam:plugin/") {
            continue;
        }
        let mut stubs = linker.instance(name).expect("a Seam interface");
        for (export, item) in instance.exports(engine) {
            let defined = match item.ty {
                ComponentItem::ComponentFunc(_) => stubs.func_new(export, |_, _, _, _| {
                    Err(wasmtime::Error::msg("the floor has no Seam imports"))
                }),
                // `use wasi:io/poll.{pollable}`: WASI's own resource, re-exported.
                ComponentItem::Resource(_) if export == "pollable" => stubs.resource(
                    export,
                    ResourceType::host::<wasmtime_wasi::p2::DynPollable>(),
                    |_, _| Ok(()),
                ),
                ComponentItem::Resource(_) => {
                    stubs.resource(export, ResourceType::host::<Stub>(), |_, _| Ok(()))
                }
                _ => Ok(()),
            };
            defined.expect("a stub is defined");
        }
    }
}

fn floor_engine(pooling: bool) -> Engine {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    if pooling {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(
            PoolingAllocationConfig::default(),
        ));
    }
    Engine::new(&config).expect("the floor engine starts")
}

/// A fresh store with an empty WASI context, and an instance of the guest in it.
async fn floor_instance(engine: &Engine, pre: &InstancePre<Floor>) -> (Store<Floor>, Instance) {
    let mut store = Store::new(
        engine,
        Floor {
            ctx: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        },
    );
    let instance = pre
        .instantiate_async(&mut store)
        .await
        .expect("the guest instantiates");
    (store, instance)
}

/// wasmtime's compile time for the component, and instantiate + `describe` + drop on the
/// default engine and on the default pooling allocator.
async fn floor(path: &Path, n: usize) -> serde_json::Value {
    let on_demand = floor_engine(false);
    let bytes = std::fs::read(path).expect("the guest is readable");
    let t = Instant::now();
    let component = Component::new(&on_demand, &bytes).expect("wasmtime compiles the guest");
    let compile = t.elapsed();
    let artifact = component.serialize().expect("the artifact serialises");
    let mut out = serde_json::json!({ "compile_ms": ms(compile) });
    for (name, engine) in [("on_demand", on_demand), ("pooling", floor_engine(true))] {
        // SAFETY: the bytes were serialised just above by this wasmtime, with the same settings.
        let component = unsafe { Component::deserialize(&engine, &artifact) }
            .expect("the artifact deserialises");
        let export = component
            .component_type()
            .exports(&engine)
            .map(|(name, _)| name.to_string())
            .find(|name| name.starts_with("seam:plugin/provider@"))
            .expect("the guest exports a provider");
        let mut linker = Linker::<Floor>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("the WASI linker");
        stub_seam_imports(&mut linker, &engine, &component);
        let pre = linker.instantiate_pre(&component).expect("the guest links");
        let once = || async {
            let (mut store, instance) = floor_instance(&engine, &pre).await;
            let interface = instance
                .get_export_index(&mut store, None, &export)
                .expect("the provider interface");
            let describe = instance
                .get_export_index(&mut store, Some(&interface), "describe")
                .and_then(|i| instance.get_func(&mut store, i))
                .expect("a describe export");
            let mut result = [Val::Bool(false)];
            describe
                .call_async(&mut store, &[Val::String(CONFIG.into())], &mut result)
                .await
                .expect("describe returns");
            std::hint::black_box(result);
        };
        out[name] = sample(n, once).await;
        // Without the call: how much of the above is instantiation, and how much the guest's
        // first call (for an interpreter, its start-up in the fresh instance).
        let bare = || async {
            let (_store, instance) = floor_instance(&engine, &pre).await;
            std::hint::black_box(instance);
        };
        out[format!("{name}_instantiate_only")] = sample(n, bare).await;
    }
    out
}

async fn measure(g: &Guest) -> serde_json::Value {
    assert!(
        g.path.is_file(),
        "{} is missing: `make bench-guests` builds it",
        g.path.display()
    );
    let mut cold = Vec::new();
    let mut cache = None;
    for _ in 0..g.cold_loads {
        let empty = tempfile::tempdir().expect("a temp dir");
        let host = Host::new(options(empty.path(), 16)).expect("the host starts");
        cold.push(load(&host, &g.path).await);
        host.unload_all().await;
        // The last one's cache is what the rest of the measurements load from.
        cache = Some(empty);
    }
    let cache = cache.expect("at least one first load");
    let mut warm = Vec::new();
    for _ in 0..5 {
        let host = Host::new(options(cache.path(), 16)).expect("the host starts");
        warm.push(load(&host, &g.path).await);
        host.unload_all().await;
    }

    let host = Host::new(options(cache.path(), LIVE as u32 + 16)).expect("the host starts");
    load(&host, &g.path).await;
    let template = Template::new(&host, &g.path).expect("the guest links");
    let instantiate = sample(g.samples, || async {
        let mut instance = template.provider().await.expect("instantiate");
        let described = instance.describe(CONFIG).await;
        std::hint::black_box(described.expect("describe"));
    })
    .await;
    drop(template);
    let run = sample(g.samples, || one_run(&host, "g", request())).await;
    let live = live(&host).await;
    host.unload_all().await;
    drop(host);

    let floor = floor(&g.path, g.samples).await;
    let results = serde_json::json!({
        "wasm_bytes": std::fs::metadata(&g.path).map(|m| m.len()).unwrap_or(0),
        "first_load_ms": median_ms(cold),
        "cached_load_ms": median_ms(warm),
        "instantiate": instantiate,
        "run": run,
        "live": live,
        "floor": floor,
    });
    eprintln!("{}: {results}", g.key);
    results
}

/// `SEAM_BENCH_CACHE=DIR`: only the loads, through the compile cache in `DIR`, kept between
/// runs: one load that fills it (a first load if it was empty), then `SEAM_BENCH_LOADS` (11)
/// cached loads. For A/B comparisons of the cache, alternating two builds over one directory
/// (a change of artifact format names its entries apart).
async fn loads_only(g: &Guest, cache: &Path) -> serde_json::Value {
    let n: usize = std::env::var("SEAM_BENCH_LOADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(11);
    let fill = {
        let host = Host::new(options(cache, 16)).expect("the host starts");
        let took = load(&host, &g.path).await;
        host.unload_all().await;
        took
    };
    let mut warm = Vec::new();
    for _ in 0..n {
        let host = Host::new(options(cache, 16)).expect("the host starts");
        warm.push(load(&host, &g.path).await);
        host.unload_all().await;
    }
    let min = warm.iter().min().copied().map_or(0.0, ms);
    serde_json::json!({
        "fill_ms": ms(fill),
        "cached_load_ms": median_ms(warm),
        "cached_load_min_ms": min,
    })
}

fn main() {
    let rt = runtime();
    if let Some(cache) = std::env::var_os("SEAM_BENCH_CACHE") {
        let cache = PathBuf::from(cache);
        let only = std::env::var("SEAM_BENCH_GUESTS").ok();
        for g in guests() {
            if only
                .as_deref()
                .is_some_and(|o| !o.split(',').any(|k| k == g.key))
            {
                continue;
            }
            let cache = cache.clone();
            let key = g.key;
            let value = rt
                .block_on(rt.spawn(async move { loads_only(&g, &cache).await }))
                .expect("the load benchmark panicked");
            eprintln!("loads {key}: {value}");
        }
        return;
    }
    // `SEAM_BENCH_GUESTS=python,js` measures only those, keeping the others' last results.
    let only = std::env::var("SEAM_BENCH_GUESTS").ok();
    let mut results: serde_json::Map<String, serde_json::Value> =
        std::fs::read_to_string(seam_bench::out_dir().join("guests.json"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
    results.remove("loadavg");
    for g in guests() {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|k| k == g.key))
        {
            continue;
        }
        let key = g.key;
        let value = rt
            .block_on(rt.spawn(async move { measure(&g).await }))
            .expect("the guest benchmark panicked");
        results.insert(key.into(), value);
    }
    write_result("guests", &serde_json::Value::Object(results));
}
