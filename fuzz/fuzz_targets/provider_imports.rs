//! Fuzzes a provider's imports: any bytes, as the program the fuzz provider component runs
//! (which imports it calls, in which order, with which arguments). Needs `make guests`.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    host: seam_host::Host,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let host = runtime.block_on(async {
            let host = seam_host::Host::new(seam_host::HostOptions::default()).expect("a host");
            let guests = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/guests/wasm32-wasip2/release");
            let text = seam_fuzz::provider_imports_config(&guests);
            let config = seam_host::Config::parse(&text, Path::new("fuzz.toml"), &guests)
                .expect("the fuzz config parses");
            let report = host.load(&config).await;
            assert!(report.is_ok(), "{}", report.failures());
            host
        });
        Fixture { runtime, host }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let f = fixture();
    f.runtime
        .block_on(seam_fuzz::provider_imports(&f.host, data));
});
