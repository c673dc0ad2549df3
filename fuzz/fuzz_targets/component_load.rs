//! Fuzzes the component boundary: any bytes, as a component file, inspected and loaded by one
//! host (seed the corpus with the built guests, `target/guests/wasm32-wasip2/release`).
#![no_main]

use std::sync::OnceLock;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    host: seam_host::Host,
    dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let host = runtime.block_on(async {
            let mut options = seam_host::HostOptions::default();
            options.engine.cache_dir = None;
            seam_host::Host::new(options).expect("a host")
        });
        Fixture {
            runtime,
            host,
            dir: tempfile::tempdir().expect("a temp dir"),
        }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let f = fixture();
    f.runtime
        .block_on(seam_fuzz::component_load(&f.host, f.dir.path(), data));
});
