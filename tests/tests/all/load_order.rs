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
        report.failed.iter().any(|e| e.id() == "second"),
        "{}",
        report.failures()
    );
    host.unload_all().await;
}

/// The race forced: the first entry's component is a FIFO, which the loader reads only once the
/// test writes it, and the test writes it only after the second entry has been prepared (its
/// `describe` logged). The second is ready first, every time; the first still wins the name.
#[tokio::test(flavor = "current_thread")]
async fn the_first_entry_keeps_a_contested_name_when_the_second_is_prepared_first() {
    let (log, _guard) = CapturedLog::start();
    let dir = tempfile::tempdir().unwrap();
    let fifo = fifo_in(dir.path(), "first.wasm");
    let toml = provider_entry("first", &fifo.display().to_string(), "shared")
        + "[[plugin]]\nid = \"second\"\ncomponent = \"mock_provider.wasm\"\n\
           config = { name = \"shared\", reply = \"from second\", announce = \"second described\" }\n";
    let host = test_host();
    let load = {
        let host = host.clone();
        let cfg = config(&toml);
        tokio::spawn(async move { host.load(&cfg).await })
    };
    log.wait_for("the second entry's describe", |_| {
        !log.of_plugin("second", "second described").is_empty()
    })
    .await;
    assert!(!load.is_finished(), "the first entry cannot be ready yet");
    // Only now does the first entry's component exist.
    feed(fifo, guest("mock_provider")).await;
    let report = tokio::time::timeout(BARRIER_TIMEOUT, load)
        .await
        .expect("the load ends")
        .unwrap();
    assert_eq!(report.failed.len(), 1, "{}", report.failures());
    let failure = report.failures();
    assert!(
        report.failed[0].id() == "second" && failure.contains("DUPLICATE_PROVIDER"),
        "{failure}"
    );
    let plugins = host.plugins().await;
    let state = |id: &str| plugins.iter().find(|p| p.id == id).unwrap().state.clone();
    assert_eq!(state("first"), PluginState::Active);
    assert!(matches!(state("second"), PluginState::Failed(_)));
    assert_eq!(reply_of(&host, "shared").await, "from first");
    host.unload_all().await;
}

/// The tool-name race forced the same way: the first tool entry's component is a FIFO, written
/// only once the second tool entry has been bound (its `bind` logged).
#[tokio::test(flavor = "current_thread")]
async fn the_first_entry_keeps_a_contested_tool_name_when_the_second_is_prepared_first() {
    let (log, _guard) = CapturedLog::start();
    let dir = tempfile::tempdir().unwrap();
    let fifo = fifo_in(dir.path(), "tool-a.wasm");
    let toml = format!(
        "[[plugin]]\nid = \"tool-a\"\ncomponent = \"{}\"\nconfig = {{ toolName = \"ask\", mode = \"ok\" }}\n\n",
        fifo.display()
    ) + &entry(
        "tool-b",
        "hostile_tool",
        "toolName = \"ask\", mode = \"ok\", announce = \"tool-b bound\"",
    );
    let host = test_host();
    let load = {
        let host = host.clone();
        let cfg = config(&toml);
        tokio::spawn(async move { host.load(&cfg).await })
    };
    log.wait_for("the second tool's bind", |_| {
        !log.of_plugin("tool-b", "tool-b bound").is_empty()
    })
    .await;
    assert!(!load.is_finished(), "the first entry cannot be ready yet");
    feed(fifo, guest("hostile_tool")).await;
    let report = tokio::time::timeout(BARRIER_TIMEOUT, load)
        .await
        .expect("the load ends")
        .unwrap();
    assert_eq!(report.failed.len(), 1, "{}", report.failures());
    assert_eq!(report.failed[0].id(), "tool-b", "{}", report.failures());
    assert_eq!(host.tools().get("ask").expect("mounted").plugin, "tool-a");
    host.unload_all().await;
}

/// A FIFO at `dir/name`: the loader's read of it blocks until [`feed`] writes it.
fn fifo_in(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let fifo = dir.join(name);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    fifo
}

/// Writes the component at `from` into `fifo` (opening it waits for the loader's read).
async fn feed(fifo: std::path::PathBuf, from: std::path::PathBuf) {
    let bytes = std::fs::read(from).unwrap();
    tokio::task::spawn_blocking(move || std::fs::write(&fifo, bytes))
        .await
        .unwrap()
        .unwrap();
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
