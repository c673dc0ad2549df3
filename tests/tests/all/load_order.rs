//! Which entry keeps a contested name, and what `reconfigure` retries.
//! CONTRACT section 2: between entries of one config, "first" means first in the file.

use std::io::Write;

use seam_host::{Host, PluginState};
use seam_tests::*;

/// A mock entry `id` registering provider `name`.
fn provider_entry(id: &str, component: &str, name: &str) -> String {
    format!(
        "[[plugin]]\nid = \"{id}\"\ncomponent = \"{component}\"\nconfig = {{ name = \"{name}\", reply = \"from {id}\" }}\n\n"
    )
}

async fn reply_of(host: &Host, provider: &str) -> String {
    let run = host.subagents().start(provider, request("x")).unwrap();
    let r = run.result().await.unwrap();
    run.dispose().await;
    seam_host::blocks_text(&r.output)
}

#[tokio::test]
async fn the_first_entry_keeps_a_contested_provider_name_whatever_loads_first() {
    // The first entry is a larger component than the second (the faulty provider in `ok`
    // mode), so with a warm cache or a cold one the second tends to be ready first.
    for round in 0..3 {
        let host = test_host();
        let toml = format!(
            "[[plugin]]\nid = \"first\"\ncomponent = \"faulty_provider.wasm\"\nconfig = {{ mode = \"ok\", name = \"shared\", reply = \"from first\" }}\n\n{}",
            provider_entry("second", "mock_provider.wasm", "shared")
        );
        let report = host.load(&config(&toml)).await;
        assert_eq!(
            report.failed.len(),
            1,
            "round {round}: {}",
            report.failures()
        );
        let failure = report.failures();
        assert!(failure.contains("plugin `second`"), "{failure}");
        assert!(failure.contains("DUPLICATE_PROVIDER"), "{failure}");
        let plugins = host.plugins().await;
        assert_eq!(plugins[0].state, PluginState::Active);
        assert!(matches!(plugins[1].state, PluginState::Failed(_)));
        assert_eq!(reply_of(&host, "shared").await, "from first");
        host.unload_all().await;
    }
}

#[tokio::test]
async fn the_first_entry_keeps_a_contested_name_with_a_cold_cache() {
    // A cache of its own, empty: both entries compile, the second one's component is smaller
    // and would finish first.
    let dir = tempfile::tempdir().unwrap();
    let mut options = test_options();
    options.engine.cache_dir = Some(dir.path().to_path_buf());
    let host = Host::new(options).unwrap();
    let toml = format!(
        "[[plugin]]\nid = \"first\"\ncomponent = \"hostile_provider.wasm\"\nconfig = {{ mode = \"ok\", name = \"shared\" }}\n\n{}",
        provider_entry("second", "mock_provider.wasm", "shared")
    );
    let report = host.load(&config(&toml)).await;
    let plugins = host.plugins().await;
    assert_eq!(
        plugins[0].state,
        PluginState::Active,
        "{}",
        report.failures()
    );
    assert!(
        report.failures().contains("plugin `second`"),
        "{}",
        report.failures()
    );
    host.unload_all().await;
}

#[tokio::test]
async fn the_first_entry_keeps_a_contested_tool_name() {
    let toml = mock("p", "")
        + &entry(
            "tool-a",
            "subagent_tool",
            "provider = \"p\", toolName = \"ask\"",
        )
        + &entry(
            "tool-b",
            "subagent_tool",
            "provider = \"p\", toolName = \"ask\"",
        );
    for _ in 0..3 {
        let host = test_host();
        let report = host.load(&config(&toml)).await;
        assert_eq!(report.failed.len(), 1, "{}", report.failures());
        assert!(report.failures().contains("plugin `tool-b`"));
        let tool = host.tools().get("ask").expect("mounted");
        assert_eq!(tool.plugin, "tool-a");
        host.unload_all().await;
    }
}

#[tokio::test]
async fn reconfigure_retries_an_unchanged_entry_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late.wasm");
    let toml = format!(
        "[[plugin]]\nid = \"late\"\ncomponent = \"{}\"\nconfig = {{ name = \"late\" }}\n",
        path.display()
    );
    let cfg = config(&toml);
    let host = test_host();
    let report = host.load(&cfg).await;
    assert_eq!(report.failed.len(), 1);
    assert!(
        report.failures().contains("late.wasm"),
        "{}",
        report.failures()
    );

    // The missing file appears; the same config is applied again.
    let bytes = std::fs::read(guest("mock_provider")).unwrap();
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let report = host.reconfigure(&cfg).await;
    assert!(report.is_ok(), "{}", report.failures());
    assert_eq!(report.retried, vec!["late".to_string()]);
    assert_eq!(host.plugins().await[0].state, PluginState::Active);
    assert!(host.subagents().descriptor("late").is_some());
    host.unload_all().await;
}
