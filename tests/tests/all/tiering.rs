//! Tiered compilation: a tiered host's first load of a large component is served by Winch's
//! code while Cranelift compiles it in the background; Cranelift's code is swapped in for the
//! runs that start after (as `seam dev` swaps a rebuilt plugin), a run going across the swap
//! finishes, and the next host starts on Cranelift's cached artifact. The mock provider is
//! small, so these hosts tier every component (`tier_min_bytes = 0`).

use std::path::Path;

use seam_host::engine::Compiler;
use seam_host::{ContentBlock, Event, Host, HostOptions, StopReason};
use seam_tests::*;

fn options(cache: &Path, compiler: Compiler) -> HostOptions {
    let mut options = test_options();
    options.engine.cache_dir = Some(cache.to_path_buf());
    options.engine.compiler = compiler;
    options.engine.tier_min_bytes = 0;
    options
}

/// The compile cache's artifacts (one per component and engine).
fn artifacts(cache: &Path) -> usize {
    std::fs::read_dir(cache)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".cwasm"))
        .count()
}

async fn compiler_of(host: &Host, id: &str) -> Option<Compiler> {
    host.plugins()
        .await
        .into_iter()
        .find(|p| p.id == id)
        .and_then(|p| p.compiler)
}

/// How many times plugin `id` was loaded, by the events.
fn loads(events: &[Event], id: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::PluginLoaded { id: loaded, .. } if loaded == id))
        .count()
}

#[tokio::test]
async fn winch_serves_the_first_load_until_cranelift_s_code_is_swapped_in() {
    let cache = tempfile::tempdir().unwrap();
    let host = Host::new(options(cache.path(), Compiler::Tiered)).unwrap();
    let mut events = watch_events(&host);
    let toml = mock(
        "m",
        "steering = true, awaitMessages = 1, reply = \"got {messages}\"",
    );
    loaded(host.load(&config(&toml)).await);
    // Winch's artifact is written by the load itself, before the load returns.
    assert!(artifacts(cache.path()) >= 1);
    let going = host.subagents().start("m", request("x")).unwrap();
    going.started().await.unwrap();

    // The swap: the plugin is loaded a second time, on Cranelift's code.
    wait_for(&mut events, "the tier-up swap", |seen| {
        loads(seen, "m") == 2
    })
    .await;
    assert_eq!(compiler_of(&host, "m").await, Some(Compiler::Cranelift));
    assert_eq!(
        artifacts(cache.path()),
        2,
        "Winch's artifact and Cranelift's"
    );
    let after = host.subagents().start("m", request("y")).unwrap();
    after
        .send_message(vec![ContentBlock::text("late")])
        .unwrap();
    assert_eq!(after.result().await.unwrap().output_text(), "got late");
    after.dispose().await;

    // The run that started before the swap finishes, on whichever code it started.
    going
        .send_message(vec![ContentBlock::text("early")])
        .unwrap();
    let result = going.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.output_text(), "got early");
    going.dispose().await;
    host.unload_all().await;
    assert_eq!(host.live_instances(), 0);

    // The next host finds Cranelift's artifact: no Winch, nothing to swap.
    let next = Host::new(options(cache.path(), Compiler::Tiered)).unwrap();
    loaded(next.load(&config(&toml)).await);
    assert_eq!(compiler_of(&next, "m").await, Some(Compiler::Cranelift));
    next.unload_all().await;
}

#[tokio::test]
async fn a_forced_compiler_and_ahead_of_time_compiles_never_tier() {
    let cache = tempfile::tempdir().unwrap();
    let winch = Host::new(options(cache.path(), Compiler::Winch)).unwrap();
    loaded(winch.load(&config(&mock("m", ""))).await);
    assert_eq!(compiler_of(&winch, "m").await, Some(Compiler::Winch));
    winch.unload_all().await;

    // `seam compile` makes Cranelift's code even on a tiered host.
    let cache = tempfile::tempdir().unwrap();
    let tiered = Host::new(options(cache.path(), Compiler::Tiered)).unwrap();
    assert!(!tiered.precompile(&guest("mock_provider")).await.unwrap());
    loaded(tiered.load(&config(&mock("m", ""))).await);
    assert_eq!(compiler_of(&tiered, "m").await, Some(Compiler::Cranelift));
    assert_eq!(artifacts(cache.path()), 1, "no Winch artifact was made");
    tiered.unload_all().await;
}

#[tokio::test]
async fn a_component_below_the_size_goes_straight_to_cranelift() {
    let cache = tempfile::tempdir().unwrap();
    let mut options = options(cache.path(), Compiler::Tiered);
    options.engine.tier_min_bytes = u64::MAX;
    let host = Host::new(options).unwrap();
    loaded(host.load(&config(&mock("m", ""))).await);
    assert_eq!(compiler_of(&host, "m").await, Some(Compiler::Cranelift));
    assert_eq!(artifacts(cache.path()), 1);
    host.unload_all().await;
}

#[tokio::test]
async fn a_tool_stays_mounted_and_an_observer_subscribed_across_their_tier_ups() {
    let (log, _guard) = CapturedLog::start();
    let cache = tempfile::tempdir().unwrap();
    let host = Host::new(options(cache.path(), Compiler::Tiered)).unwrap();
    let mut events = watch_events(&host);
    let toml = mock("m", "")
        + &entry("t", "subagent_tool", "provider = \"m\", toolName = \"t\"")
        + &entry("o", "observer_probe", "");
    loaded(host.load(&config(&toml)).await);
    wait_for(&mut events, "every plugin's tier-up", |seen| {
        ["m", "t", "o"].iter().all(|id| loads(seen, id) == 2)
    })
    .await;
    for id in ["m", "t", "o"] {
        assert_eq!(
            compiler_of(&host, id).await,
            Some(Compiler::Cranelift),
            "{id}"
        );
    }
    // The tool was never unmounted: its calls had a tool to reach all along.
    let seen = events.borrow().clone();
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, Event::ToolUnmounted { name, .. } if name == "t")),
        "{seen:?}"
    );
    let args = serde_json::json!({"description": "a task", "prompt": "late"}).to_string();
    let result = host
        .call_tool(
            "t",
            seam_host::ParentRef::top_level("agent-0", "/work"),
            &args,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!result.is_error, "{result:?}");

    // The observer, on its new code, still sees what happens.
    let run = host.subagents().start("m", request("x")).unwrap();
    let id = run.id().to_string();
    run.result().await.unwrap();
    run.dispose().await;
    log.wait_for("the observer's line for the run's end", |lines| {
        lines
            .iter()
            .any(|l| l.contains("observed subagent/end") && l.contains(&id))
    })
    .await;
    host.unload_all().await;
}
