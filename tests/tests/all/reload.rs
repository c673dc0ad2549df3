//! Reloading a changed entry: a rebuilt component file counts as a change; `Reload::Restart`
//! cancels the old version's runs, `Reload::Swap` (what `seam dev` uses) lets them finish and
//! keeps the last good version serving when the new one is broken.

use std::path::Path;

use seam_host::{Config, ContentBlock, Host, PluginState, Reload, StopReason};
use seam_tests::*;

/// A mock entry whose component is `path` (a copy this test can rewrite).
fn mock_at(path: &Path, extra: &str) -> Config {
    config(&format!(
        "[[plugin]]\nid = \"m\"\ncomponent = \"{}\"\nconfig = {{ name = \"m\", steering = true{extra} }}\n",
        path.display()
    ))
}

async fn answer(host: &Host) -> String {
    let run = host.subagents().start("m", request("x")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    result.output_text()
}

/// Rewrites the file with `bytes`, making sure its modification time moves on even on a file
/// system with coarse timestamps.
fn rewrite(path: &Path, bytes: &[u8]) {
    let before = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    std::fs::write(path, bytes).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    let later = before.map_or_else(std::time::SystemTime::now, |t| {
        t + std::time::Duration::from_secs(1)
    });
    file.set_modified(later).unwrap();
}

#[tokio::test]
async fn a_rebuilt_component_is_reloaded_and_an_untouched_one_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mock.wasm");
    let bytes = std::fs::read(guest("mock_provider")).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let host = test_host();
    let cfg = mock_at(&path, ", reply = \"one\"");
    loaded(host.load(&cfg).await);
    let report = loaded(host.reconfigure(&cfg).await);
    assert_eq!(report.kept, ["m"]);
    rewrite(&path, &bytes);
    let report = loaded(host.reconfigure(&cfg).await);
    assert_eq!(report.reloaded, ["m"]);
    assert_eq!(answer(&host).await, "one");
    host.unload_all().await;
}

#[tokio::test]
async fn swap_lets_the_old_versions_runs_finish_and_restart_cancels_them() {
    for reload in [Reload::Swap, Reload::Restart] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mock.wasm");
        std::fs::copy(guest("mock_provider"), &path).unwrap();
        let host = test_host();
        let old = ", awaitMessages = 1, reply = \"old {messages}\"";
        loaded(host.load(&mock_at(&path, old)).await);
        let going = host.subagents().start("m", request("x")).unwrap();
        going.started().await.unwrap();

        let report = loaded(
            host.reconfigure_with(&mock_at(&path, ", reply = \"new\""), reload)
                .await,
        );
        assert_eq!(report.reloaded, ["m"], "{reload:?}");
        assert_eq!(
            answer(&host).await,
            "new",
            "{reload:?}: new runs see the new version"
        );
        match reload {
            Reload::Swap => {
                going
                    .send_message(vec![ContentBlock::text("done")])
                    .unwrap();
                let result = going.result().await.unwrap();
                assert_eq!(result.stop_reason, StopReason::Completed);
                assert_eq!(result.output_text(), "old done");
            }
            Reload::Restart => {
                let result = going.result().await.unwrap();
                assert_eq!(result.stop_reason, StopReason::Aborted);
            }
        }
        going.dispose().await;
        host.unload_all().await;
        assert_eq!(host.live_runs(), 0, "{reload:?}");
        assert_eq!(host.live_instances(), 0, "{reload:?}");
    }
}

#[tokio::test]
async fn a_broken_new_version_leaves_the_last_good_one_serving_under_swap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mock.wasm");
    let bytes = std::fs::read(guest("mock_provider")).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let host = test_host();
    let good = mock_at(&path, ", reply = \"good\"");
    loaded(host.load(&good).await);

    // A rebuild that is not a component.
    rewrite(&path, b"\0asm half-written");
    let report = host.reconfigure_with(&good, Reload::Swap).await;
    assert_eq!(report.kept_last_good, ["m"]);
    assert!(report.reloaded.is_empty());
    assert!(
        report.failed.iter().any(|e| e.id() == "m"),
        "{}",
        report.failures()
    );
    assert_eq!(answer(&host).await, "good");
    let info = host.plugins().await.remove(0);
    assert_eq!(info.state, PluginState::Active);
    assert!(info
        .stale
        .as_deref()
        .unwrap_or("")
        .contains("not a valid WebAssembly component"));

    // A good component again, but a config it refuses: still the last good one.
    rewrite(&path, &bytes);
    let report = host
        .reconfigure_with(&mock_at(&path, ", bogus = 1"), Reload::Swap)
        .await;
    assert_eq!(report.kept_last_good, ["m"]);
    assert!(report.failures().contains("bogus"), "{}", report.failures());
    assert_eq!(answer(&host).await, "good");

    // Fixed: the new version takes over, and nothing is stale.
    let report = loaded(
        host.reconfigure_with(&mock_at(&path, ", reply = \"fixed\""), Reload::Swap)
            .await,
    );
    assert_eq!(report.reloaded, ["m"]);
    assert_eq!(answer(&host).await, "fixed");
    assert!(host.plugins().await[0].stale.is_none());

    // Under `Restart`, a broken version leaves the entry failed.
    rewrite(&path, b"\0asm half-written");
    let report = host.reconfigure(&good).await;
    assert_eq!(report.failed.len(), 1);
    assert!(host.subagents().descriptor("m").is_none());
    host.unload_all().await;
}
