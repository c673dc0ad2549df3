//! Remote runs on the cluster against local ones (issue: beyond one machine): a front-end host
//! joined to a real `nats-server` on loopback, with 1, 2 and 4 worker hosts serving the mock
//! component, all in this process.
//!
//! - latency: 2,000 sequential full runs (start, readiness, result, dispose) after 200
//!   unmeasured, each timed on its own: p50 and p99, remote and local (the mock on a worker
//!   host directly);
//! - throughput: 64 callers for 3 s, each starting its next run as soon as the last is disposed.
//!
//! Every host shares this machine's two cores: more workers add replicas, not cores.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seam_bench::{
    host, on_worker, one_run, options, percentiles, request, runtime, write_result, MOCK,
};
use seam_host::cluster::{ClusterConfig, Served, Worker, WorkerOptions};
use seam_host::Host;
use seam_tests::nats::NatsServer;

const WARMUP: usize = 200;
const RUNS: usize = 2_000;
const CALLERS: usize = 64;
const MEASURE: Duration = Duration::from_secs(3);

async fn latency(host: &Host) -> serde_json::Value {
    let req = request();
    for _ in 0..WARMUP {
        one_run(host, MOCK, req.clone()).await;
    }
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        one_run(host, MOCK, req.clone()).await;
        samples.push(t.elapsed());
    }
    percentiles(&mut samples)
}

async fn throughput(host: &Host) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (host, stop, done) = (host.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                let req = request();
                while !stop.load(Ordering::Relaxed) {
                    one_run(&host, MOCK, req.clone()).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(MEASURE).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a caller panicked");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let rt = runtime();
    let server = NatsServer::start();
    let mut config = ClusterConfig::new(server.url.clone());
    config.name = "bench".into();
    let mut rows = serde_json::Map::new();
    for workers in [1usize, 2, 4] {
        let config = config.clone();
        let row = on_worker(&rt, async move {
            let mut hosts = Vec::new();
            let mut serving = Vec::new();
            for i in 0..workers {
                let h = host(options(1000), "", 1000).await;
                let w = Worker::serve(
                    &config,
                    h.subagents().clone(),
                    h.events().clone(),
                    WorkerOptions {
                        id: format!("w{i}"),
                        providers: vec![Served {
                            name: MOCK.into(),
                            capacity: 1000,
                            waits: true,
                        }],
                        contract: "seam:plugin@0.3.0".into(),
                        keep_finished: Duration::from_secs(60),
                    },
                )
                .await
                .expect("the worker serves");
                hosts.push(h);
                serving.push(w);
            }
            let front = Host::new(options(10)).expect("the front-end starts");
            front.join_cluster(&config).await.expect("joins");
            let local = latency(&hosts[0]).await;
            let remote = latency(&front).await;
            let rate = throughput(&front).await;
            for w in serving {
                w.drain(Duration::from_secs(5)).await;
            }
            front.unload_all().await;
            for h in hosts {
                h.unload_all().await;
            }
            serde_json::json!({ "local": local, "remote": remote, "runs_per_sec": rate })
        });
        eprintln!("cluster x{workers}: {row}");
        rows.insert(workers.to_string(), row);
    }
    write_result("cluster", &rows.into());
}
