//! The loader: config entries, states, bad input, reconfigure, unload order, the compile cache.

use std::path::Path;
use std::sync::atomic::Ordering;

use seam_host::kinds::{LinkFailure, PluginError};
use seam_host::{Config, Event, Host, LoadError, PluginKind, PluginState};
use seam_tests::*;

#[tokio::test]
async fn bad_components_fail_with_errors_naming_the_entry_and_others_load() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("junk.wasm");
    std::fs::write(&garbage, b"\0asm not really").unwrap();
    let core = dir.path().join("core.wasm");
    // A core module (not a component): the smallest valid module.
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let toml = format!(
        "[[plugin]]\nid = \"junk\"\ncomponent = \"{}\"\n\n[[plugin]]\nid = \"core\"\ncomponent = \"{}\"\n\n[[plugin]]\nid = \"gone\"\ncomponent = \"missing.wasm\"\n\n[[plugin]]\nid = \"wrong\"\nkind = \"provider\"\ncomponent = \"subagent_tool.wasm\"\nconfig = {{ provider = \"m\" }}\n\n",
        garbage.display(),
        core.display()
    ) + &mock("m", "");
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 4, "{:?}", report.failed);
    let msg = |id: &str| {
        let e = report
            .failed
            .iter()
            .find(|e| e.id() == id)
            .unwrap_or_else(|| panic!("no error for {id}: {:?}", report.failed));
        // The message names the entry too, for the person reading it.
        let text = e.to_string();
        assert!(text.contains(&format!("plugin `{id}`")), "{text}");
        text
    };
    assert!(
        msg("junk").contains(
            "junk.wasm` is not a valid WebAssembly component: failed to parse WebAssembly \
             module: unknown binary version"
        ),
        "{}",
        msg("junk")
    );
    // A core module is valid WebAssembly but not a component: that, precisely, is the cause.
    assert!(
        msg("core").contains(
            "core.wasm` is not a valid WebAssembly component: failed to parse WebAssembly \
             module: attempted to parse a wasm module with a component parser"
        ),
        "{}",
        msg("core")
    );
    assert!(
        msg("gone").contains("cannot read component `") && msg("gone").contains("missing.wasm`"),
        "{}",
        msg("gone")
    );
    assert!(
        msg("wrong").contains("is a tool component, but the entry expects a provider"),
        "{}",
        msg("wrong")
    );
    let plugins = host.plugins().await;
    let state = |id: &str| plugins.iter().find(|p| p.id == id).unwrap().state.clone();
    assert!(matches!(state("junk"), PluginState::Failed(_)));
    assert_eq!(state("m"), PluginState::Active);
    let run = host.subagents().start("m", request("x")).unwrap();
    assert!(run.result().await.unwrap().stop_reason.is_success());
    run.dispose().await;
}

#[tokio::test]
async fn a_component_importing_an_interface_the_host_lacks_fails_to_link_naming_it() {
    // A provider whose `run-context` import is renamed: nothing on this host provides it.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(guest("legacy_provider")).unwrap();
    let from: &[u8] = b"seam:plugin/run-context@0.1.0";
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the import is named in the binary");
    bytes[at..at + from.len()].copy_from_slice(b"seam:plugin/run-cantext@0.1.0");
    let path = dir.path().join("renamed.wasm");
    std::fs::write(&path, bytes).unwrap();
    let toml = format!(
        "[[plugin]]\nid = \"renamed\"\ncomponent = \"{}\"\nconfig = {{ name = \"r\" }}\n\n",
        path.display()
    ) + &mock("m", "");
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 1, "{}", report.failures());
    let failure = &*report.failed[0];
    assert_eq!(failure.id(), "renamed");
    let LoadError::Guest {
        source:
            PluginError::Link {
                kind: PluginKind::Provider,
                reason,
            },
        ..
    } = failure
    else {
        panic!("not a link failure: {failure}");
    };
    match &**reason {
        LinkFailure::Missing { instance, .. } => {
            assert_eq!(instance, "seam:plugin/run-cantext@0.1.0")
        }
        other => panic!("not a missing import: {other:?}"),
    }
    assert!(
        failure
            .to_string()
            .contains("needs `seam:plugin/run-cantext@0.1.0`"),
        "{failure}"
    );
    // The others load.
    assert!(host.subagents().descriptor("m").is_some());
}

#[tokio::test]
async fn bad_config_keys_are_errors_naming_entry_and_key() {
    let base = Path::new("/nowhere");
    let cases = [
        ("[[plugin]]\nid = \"a\"\ncompnent = \"x.wasm\"\n", "plugin entry 1 (id `a`)", "compnent"),
        ("[[plugin]]\nid = \"a\"\ncomponent = \"x.wasm\"\n[[plugin]]\nid = \"a\"\ncomponent = \"y.wasm\"\n", "plugin entry 2 (id `a`)", "used twice"),
        ("[[plugin]]\nid = \"bad id!\"\ncomponent = \"x.wasm\"\n", "plugin entry 1", "key `id`"),
        ("[[plugin]]\nid = \"a\"\ncomponent = \"x.wasm\"\nconfig = 3\n", "plugin entry 1 (id `a`)", "config"),
        ("[[plugin]]\nid = \"a\"\ncomponent = \"x.wasm\"\nkind = \"gadget\"\n", "plugin entry 1 (id `a`)", "gadget"),
        ("[[plugins]]\nid = \"a\"\n", "test.toml", "plugins"),
        ("[[plugin]\n", "test.toml", "line 1"),
    ];
    for (text, place, key) in cases {
        let err = Config::parse(text, Path::new("test.toml"), base)
            .unwrap_err()
            .to_string();
        assert!(err.contains(place), "{text:?}: {err}");
        assert!(err.contains(key), "{text:?}: {err}");
    }
}

#[tokio::test]
async fn config_files_resolve_components_relative_to_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("plugins");
    std::fs::create_dir(&wasm).unwrap();
    std::fs::copy(guest("mock_provider"), wasm.join("m.wasm")).unwrap();
    let file = dir.path().join("seam.toml");
    std::fs::write(
        &file,
        "[[plugin]]\nid = \"m\"\ncomponent = \"plugins/m.wasm\"\n",
    )
    .unwrap();
    let config = Config::from_file(&file).unwrap();
    assert_eq!(config.plugins[0].component(), wasm.join("m.wasm"));
    let host = test_host();
    loaded(host.load(&config).await);
    assert!(
        host.subagents().descriptor("mock").is_some(),
        "default mock name"
    );
    let err = Config::from_file(&dir.path().join("nope.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope.toml"), "{err}");
}

#[tokio::test]
async fn reconfigure_diffs_entries() {
    let host = test_host();
    let first = mock("a", "")
        + &mock("b", "reply = \"old\"")
        + &entry("t", "subagent_tool", "provider = \"a\"");
    let report = loaded(host.load(&config(&first)).await);
    assert_eq!(report.loaded.len(), 3);
    let seen = record(&host);

    let second = mock("a", "") + &mock("b", "reply = \"new\"") + &mock("c", "");
    let report = loaded(host.reconfigure(&config(&second)).await);
    assert_eq!(report.kept, ["a"]);
    assert_eq!(report.reloaded, ["b"]);
    assert_eq!(report.loaded, ["c"]);
    assert_eq!(report.unloaded, ["t"]);
    // `a` was untouched: no event names it.
    let events = seen.lock().unwrap().clone();
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::ProviderRemoved { name } if name == "a")));
    let run = host.subagents().start("b", request("x")).unwrap();
    assert_eq!(words(&run.result().await.unwrap()), "new");
    run.dispose().await;
    let ids: Vec<String> = host.plugins().await.into_iter().map(|p| p.id).collect();
    assert_eq!(ids, ["a", "b", "c"]);
}

#[tokio::test]
async fn unload_runs_in_reverse_order_and_disabled_entries_stay_unloaded() {
    let toml = mock("a", "") + &mock("b", "") + &mock("c", "")
        + "[[plugin]]\nid = \"off\"\ncomponent = \"mock_provider.wasm\"\ndisabled = true\nconfig = { name = \"off\" }\n";
    let host = host_with(&toml).await;
    assert!(host.subagents().descriptor("off").is_none());
    let plugins = host.plugins().await;
    assert_eq!(plugins[3].state, PluginState::Disabled);
    assert_eq!(plugins[0].kind, Some(PluginKind::Provider));
    let seen = record(&host);
    host.unload_all().await;
    let unloaded: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::PluginUnloaded { id } => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(unloaded, ["c", "b", "a"]);
    let states: Vec<PluginState> = host.plugins().await.into_iter().map(|p| p.state).collect();
    assert_eq!(states, vec![PluginState::Disposed; 4]);
    // Unloading again does nothing; loading again brings the entries back.
    host.unload_all().await;
    loaded(host.reconfigure(&config(&toml)).await);
    assert!(host.subagents().descriptor("a").is_some());
    assert_eq!(host.plugins().await[0].state, PluginState::Active);
}

/// (compiled, hits, rewritten) of a host's compile cache.
fn cache_counts(host: &Host) -> (u64, u64, u64) {
    let stats = host.cache_stats();
    (
        stats.compiled.load(Ordering::Relaxed),
        stats.hits.load(Ordering::Relaxed),
        stats.rewritten.load(Ordering::Relaxed),
    )
}

#[tokio::test]
async fn a_warm_cache_skips_compilation() {
    // A cache of its own, so that the counts do not depend on other tests.
    let dir = tempfile::tempdir().unwrap();
    let mut options = test_options();
    options.engine.cache_dir = Some(dir.path().to_path_buf());
    let toml = mock("m", "reply = \"served\"");
    let serves = |host: Host| async move {
        let run = host.subagents().start("m", request("x")).unwrap();
        assert_eq!(words(&run.result().await.unwrap()), "served");
        run.dispose().await;
    };
    let artifacts = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
            .collect()
    };

    // Cold: compiled once, and the artifact written.
    let cold = Host::new(options.clone()).unwrap();
    loaded(cold.load(&config(&toml)).await);
    assert_eq!(cache_counts(&cold), (1, 0, 0), "compiled, hits, rewritten");
    let written = artifacts();
    assert_eq!(written.len(), 1, "{written:?}");
    let artifact = written[0].clone();
    let good = std::fs::read(&artifact).unwrap();
    serves(cold).await;

    // Warm: loaded from the artifact, nothing compiled.
    let warm = Host::new(options.clone()).unwrap();
    loaded(warm.load(&config(&toml)).await);
    assert_eq!(cache_counts(&warm), (0, 1, 0), "compiled, hits, rewritten");
    serves(warm).await;

    // Corrupt: the artifact is refused, the component compiled again and the entry rewritten.
    std::fs::write(&artifact, b"corrupt, not an artifact").unwrap();
    let repaired = Host::new(options.clone()).unwrap();
    loaded(repaired.load(&config(&toml)).await);
    assert_eq!(
        cache_counts(&repaired),
        (1, 0, 1),
        "compiled, hits, rewritten"
    );
    serves(repaired).await;
    assert_eq!(
        artifacts(),
        std::slice::from_ref(&artifact),
        "rewritten in place"
    );
    let rewritten = std::fs::read(&artifact).unwrap();
    assert_ne!(&rewritten[..], b"corrupt, not an artifact");
    assert_eq!(rewritten.len(), good.len());

    // The rewritten entry is a valid artifact again.
    let warm_again = Host::new(options).unwrap();
    loaded(warm_again.load(&config(&toml)).await);
    assert_eq!(
        cache_counts(&warm_again),
        (0, 1, 0),
        "compiled, hits, rewritten"
    );
    serves(warm_again).await;
}

/// Several entries of one component load concurrently and compile it once: the others take
/// the component being compiled (or, had the compile ended first, its artifact). Each instance
/// still serves on its own.
#[tokio::test]
async fn entries_of_one_component_compile_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = test_options();
    options.engine.cache_dir = Some(dir.path().to_path_buf());
    let toml = mock("a", "reply = \"from a\"")
        + &mock("b", "reply = \"from b\"")
        + &mock("c", "reply = \"from c\"");
    let host = Host::new(options).unwrap();
    loaded(host.load(&config(&toml)).await);
    let stats = host.cache_stats();
    let (compiled, hits, rewritten) = cache_counts(&host);
    let shared = stats.shared.load(Ordering::Relaxed);
    assert_eq!(
        (compiled, rewritten),
        (1, 0),
        "hits {hits}, shared {shared}"
    );
    assert_eq!(hits + shared, 2);
    for id in ["a", "b", "c"] {
        let run = host.subagents().start(id, request("x")).unwrap();
        assert_eq!(words(&run.result().await.unwrap()), format!("from {id}"));
        run.dispose().await;
    }
    host.unload_all().await;
}

#[tokio::test]
async fn inspect_tells_the_world_and_the_declaration() {
    let host = test_host();
    let info = host.inspect(&guest("mock_provider"), None).await.unwrap();
    assert_eq!(info.kind, PluginKind::Provider);
    assert_eq!(info.provider.unwrap().name, "mock");
    assert!(info
        .exports
        .iter()
        .any(|e| e == "seam:plugin/provider@0.4.0"));
    // The mock is built with the SDK, for the newest contract whose `run` is blocking.
    assert_eq!(info.version, seam_host::WitVersion::newest_blocking());
    let info = host.inspect(&guest("async_provider"), None).await.unwrap();
    assert_eq!(info.version, seam_host::WitVersion::LATEST);
    assert!(info.version.async_run());
    let info = host
        .inspect(
            &guest("subagent_tool"),
            Some(serde_json::json!({"provider": "p", "toolName": "go"})),
        )
        .await
        .unwrap();
    assert_eq!(info.kind, PluginKind::Tool);
    assert_eq!(info.tool_name.as_deref(), Some("go"));
    assert_eq!(info.binds_to.as_deref(), Some("p"));
    let info = host.inspect(&guest("subagent_tool"), None).await.unwrap();
    let error = info.config_error.unwrap();
    assert!(
        error.contains("config key `provider` is required"),
        "{error}"
    );
}
