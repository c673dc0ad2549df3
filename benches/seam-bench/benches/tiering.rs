//! Tiered compilation, with the large guests of `make bench-guests` (Python and JavaScript):
//!
//! - *first answer*: with an empty compile cache, `Host::new`, loading one entry and one full
//!   run's answer, on a tiered host (Winch's code first) and on a Cranelift-only one,
//!   alternated;
//! - *runs after the tier-up*: on the tiered host, once Cranelift's code was swapped in (the
//!   plugin's second `plugin/loaded` event), full runs, against the same on the Cranelift-only
//!   host, in the same process.
//!
//! Written to `target/seam-bench/tiering.json`; `SEAM_BENCH_GUESTS=python,js` picks guests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seam_bench::{percentiles, repo, request, runtime, write_result};
use seam_host::engine::Compiler;
use seam_host::{Config, EngineOptions, Event, Host, HostOptions};

/// First answers measured per guest and compiler.
const FIRSTS: usize = 2;
/// Full runs timed after the tier-up, per host.
const RUNS: usize = 300;

fn options(cache: &Path, compiler: Compiler) -> HostOptions {
    HostOptions {
        engine: EngineOptions {
            cache_dir: Some(cache.to_path_buf()),
            compiler,
            ..EngineOptions::default()
        },
        ..HostOptions::default()
    }
}

fn config(path: &Path) -> Config {
    let text = format!(
        "[[plugin]]\nid = \"g\"\ncomponent = \"{}\"\nconfig = {{ name = \"g\", reply = \"Notes on {{prompt}}\" }}\n",
        path.display()
    );
    Config::parse(&text, Path::new("tiering.toml"), &repo()).expect("the bench config parses")
}

async fn answer(host: &Host) {
    let run = host
        .subagents()
        .start("g", request())
        .expect("a run starts");
    let result = run.result().await.expect("the run settles");
    assert!(
        !result.output_text().is_empty(),
        "the guest answered nothing: {result:?}"
    );
    run.dispose().await;
}

/// A host on an empty cache in `dir`, loaded, and the time to its first answer; with a channel
/// told of each `plugin/loaded` of the entry.
async fn first_answer(
    path: &Path,
    dir: &Path,
    compiler: Compiler,
) -> (Duration, Host, tokio::sync::watch::Receiver<usize>) {
    let t = Instant::now();
    let host = Host::new(options(dir, compiler)).expect("the host starts");
    let (tx, loads) = tokio::sync::watch::channel(0usize);
    host.events().subscribe(move |e| {
        if matches!(e, Event::PluginLoaded { id, .. } if id == "g") {
            tx.send_modify(|n| *n += 1);
        }
        Ok(())
    });
    let report = host.load(&config(path)).await;
    assert!(report.is_ok(), "{}: {}", path.display(), report.failures());
    answer(&host).await;
    (t.elapsed(), host, loads)
}

async fn runs(host: &Host) -> serde_json::Value {
    for _ in 0..RUNS / 10 {
        answer(host).await;
    }
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        answer(host).await;
        samples.push(t.elapsed());
    }
    percentiles(&mut samples)
}

fn secs(d: &[Duration]) -> Vec<f64> {
    d.iter().map(Duration::as_secs_f64).collect()
}

async fn measure(path: PathBuf) -> serde_json::Value {
    let mut tiered = Vec::new();
    let mut tier_ups = Vec::new();
    let mut cranelift = Vec::new();
    for i in 0..FIRSTS {
        let tiered_dir = tempfile::tempdir().expect("a cache dir");
        let (took, tiered_host, mut loads) =
            first_answer(&path, tiered_dir.path(), Compiler::Tiered).await;
        tiered.push(took);
        // Cranelift's background compile is over before the Cranelift-only host starts, so
        // that the two never share the cores.
        let t = Instant::now();
        loads
            .wait_for(|n| *n >= 2)
            .await
            .expect("the tiered host swaps in Cranelift's code");
        tier_ups.push(t.elapsed());
        let dir = tempfile::tempdir().expect("a cache dir");
        let (took, host, _) = first_answer(&path, dir.path(), Compiler::Cranelift).await;
        cranelift.push(took);
        if i + 1 == FIRSTS {
            let after = runs(&tiered_host).await;
            let optimised = runs(&host).await;
            tiered_host.unload_all().await;
            host.unload_all().await;
            return serde_json::json!({
                "first_answer_tiered_s": secs(&tiered),
                "first_answer_cranelift_s": secs(&cranelift),
                "tier_up_after_first_answer_s": secs(&tier_ups),
                "run_after_tier_up": after,
                "run_cranelift": optimised,
            });
        }
        tiered_host.unload_all().await;
        host.unload_all().await;
    }
    unreachable!("FIRSTS is at least 1")
}

fn main() {
    let kit = |name: &str| {
        repo()
            .join("target/bench-guests")
            .join(name)
            .join(format!("{name}.wasm"))
    };
    let only = std::env::var("SEAM_BENCH_GUESTS").ok();
    let rt = runtime();
    let mut results = serde_json::Map::new();
    for (key, path) in [("python", kit("py-bench")), ("js", kit("js-bench"))] {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|k| k == key))
        {
            continue;
        }
        assert!(
            path.exists(),
            "{} is missing: run `make bench-guests`",
            path.display()
        );
        let value = rt
            .block_on(rt.spawn(measure(path)))
            .expect("the tiering benchmark panicked");
        eprintln!("tiering {key}: {value}");
        results.insert(key.into(), value);
    }
    write_result("tiering", &serde_json::Value::Object(results));
}
