//! Criterion benchmarks of what traces and metrics cost a run (issue: see the tree):
//!
//! - `telemetry/off`: the full mock-component run of `run/seam`, on a host made before
//!   telemetry is installed (nothing subscribed, as in any process without `OTEL_*`);
//! - `telemetry/on`: the same run on a host made after telemetry was installed from the
//!   environment, exporting spans and metrics by OTLP/HTTP to a sink on loopback (a hyper
//!   server answering every request 200): the run's span and the metrics' counts, through the
//!   SDK's batch queue.
//!
//! Off must be installed first: telemetry is once per process.

use std::convert::Infallible;

use criterion::{criterion_group, criterion_main, Criterion};
use seam_bench::{host, options, runtime, time_runs, MOCK};

/// An OTLP sink on loopback: reads each request whole and answers 200. It runs on a runtime of
/// its own, on its own thread, as a collector would in a process of its own: on the benchmark's
/// runtime, its connection tasks took turns with the runs being timed on the same two workers.
fn sink() -> u16 {
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("otlp-sink".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the sink's runtime starts");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("a port");
                let port = listener.local_addr().expect("its address").port();
                port_tx
                    .send(port)
                    .expect("the benchmark waits for the port");
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            |request: hyper::Request<hyper::body::Incoming>| async move {
                                use http_body_util::BodyExt as _;
                                let _ = request.into_body().collect().await;
                                Ok::<_, Infallible>(hyper::Response::new(
                                    http_body_util::Full::new(bytes::Bytes::new()),
                                ))
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        })
        .expect("the sink's thread starts");
    port_rx.recv().expect("the sink listens")
}

fn telemetry(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("telemetry");
    let port = sink();
    for name in ["off", "on"] {
        if name == "on" {
            // Read once, by the exporter being built now.
            std::env::set_var(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            );
            seam_host::telemetry::Telemetry::install_from_env()
                .expect("telemetry installs")
                .expect("the environment asks for it");
        }
        let host = rt.block_on(host(options(1000), "", 1000));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| time_runs(&rt, &host, MOCK, iters))
        });
        rt.block_on(host.unload_all());
    }
    group.finish();
    if let Some(telemetry) = seam_host::telemetry::Telemetry::installed() {
        telemetry.shutdown(std::time::Duration::from_secs(5));
    }
}

criterion_group!(benches, telemetry);
criterion_main!(benches);
