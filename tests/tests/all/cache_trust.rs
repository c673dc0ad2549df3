//! Security round two: cache_trust. The compile cache holds native code the host runs, so an
//! artifact is used only if its trailer binds it to this component and this engine, the cache
//! directory must be the user's own and private, and no grant may reach it. Every test ends with
//! a well-behaved mock provider serving.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use seam_host::{Host, HostOptions, LoadReport, StopReason};
use seam_tests::*;

/// The first bytes of the trailer that binds an artifact to its component and engine.
const TRAILER_MAGIC: &[u8] = b"seam-artifact-02";

/// Test options with the compile cache in `dir`.
fn cache_options(dir: &Path) -> HostOptions {
    let mut options = test_options();
    options.engine.cache_dir = Some(dir.to_path_buf());
    options
}

/// The artifact files in `dir`, sorted.
fn artifacts(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    files.sort();
    files
}

/// Everything in `dir`, hidden files included.
fn everything_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect()
}

#[track_caller]
fn all_loaded(report: &LoadReport) {
    assert!(report.is_ok(), "load failed:\n{}", report.failures());
}

fn provider_names(host: &Host) -> Vec<String> {
    host.subagents()
        .list()
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

/// (compiled, hits, rewritten)
fn stats(host: &Host) -> (u64, u64, u64) {
    let s = host.cache_stats();
    (
        s.compiled.load(Ordering::Relaxed),
        s.hits.load(Ordering::Relaxed),
        s.rewritten.load(Ordering::Relaxed),
    )
}

/// Runs provider `name` once; it must complete with `reply`.
async fn serves(host: &Host, name: &str, reply: &str) {
    let run = host.subagents().start(name, request("x")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(words(&result), reply);
}

/// The mock provider under its default name `mock`, replying `mock reply`.
fn plain_mock() -> String {
    entry("a", "mock_provider", "")
}

/// A cache in `cache` holding the mock provider's artifact and the spawn provider's; returns
/// their paths (mock's, spawn's).
async fn two_artifacts(cache: &Path) -> (PathBuf, PathBuf) {
    let host = Host::new(cache_options(cache)).unwrap();
    all_loaded(&host.load(&config(&plain_mock())).await);
    let mock_files = artifacts(cache);
    assert_eq!(mock_files.len(), 1, "{mock_files:?}");
    let both = plain_mock() + &entry("b", "spawn_provider", "");
    all_loaded(&host.reconfigure(&config(&both)).await);
    assert_eq!(provider_names(&host), ["mock", "spawn"]);
    let spawn_files: Vec<PathBuf> = artifacts(cache)
        .into_iter()
        .filter(|p| *p != mock_files[0])
        .collect();
    assert_eq!(spawn_files.len(), 1, "{spawn_files:?}");
    host.unload_all().await;
    (mock_files[0].clone(), spawn_files[0].clone())
}

/// Loads the mock provider in a new host over `cache`: it must register `mock` (and not what
/// the planted artifact would have declared), having recompiled and rewritten its entry; then
/// it serves, and the next host loads the rewritten entry from the cache.
async fn mock_recompiled(cache: &Path, what: &str) {
    let host = Host::new(cache_options(cache)).unwrap();
    all_loaded(&host.load(&config(&plain_mock())).await);
    assert_eq!(provider_names(&host), ["mock"], "{what}");
    assert_eq!(
        stats(&host),
        (1, 0, 1),
        "{what}: (compiled, hits, rewritten)"
    );
    serves(&host, "mock", "mock reply").await;
    host.unload_all().await;

    let host = Host::new(cache_options(cache)).unwrap();
    all_loaded(&host.load(&config(&plain_mock())).await);
    assert_eq!(
        stats(&host),
        (0, 1, 0),
        "{what}: the rewritten entry is used"
    );
    serves(&host, "mock", "mock reply").await;
}

#[tokio::test]
async fn an_artifact_copied_over_another_components_entry_is_recompiled_not_run() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("cache");
    let (mock_file, spawn_file) = two_artifacts(&cache).await;
    // The attack: the spawn provider's native code under the mock provider's name. Loading
    // the mock must not register provider `spawn`.
    std::fs::copy(&spawn_file, &mock_file).unwrap();
    mock_recompiled(&cache, "swapped artifact").await;
    // The spawn provider's own entry was not touched and is still good.
    let host = Host::new(cache_options(&cache)).unwrap();
    all_loaded(&host.load(&config(&entry("b", "spawn_provider", ""))).await);
    assert_eq!(provider_names(&host), ["spawn"]);
    assert_eq!(stats(&host), (0, 1, 0));
}

#[tokio::test]
async fn artifacts_without_trailer_truncated_or_edited_are_recompiled_not_run() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("cache");
    let (mock_file, spawn_file) = two_artifacts(&cache).await;
    let spawn = std::fs::read(&spawn_file).unwrap();
    assert!(
        spawn.starts_with(b"\x7fELF"),
        "an artifact's body is the ELF image wasmtime maps"
    );
    let trailer_at = |file: &[u8]| {
        file.windows(TRAILER_MAGIC.len())
            .rposition(|w| w == TRAILER_MAGIC)
            .expect("an artifact ends with Seam's trailer")
    };
    let at = trailer_at(&spawn);
    assert!(at > 0 && at < spawn.len(), "a trailer follows the body");

    // Bare native code, as wasmtime wrote it, with no trailer: planted.
    std::fs::write(&mock_file, &spawn[..at]).unwrap();
    mock_recompiled(&cache, "native code without the trailer").await;

    // The genuine entry, its body truncated, its trailer kept.
    let genuine = std::fs::read(&mock_file).unwrap();
    let at = trailer_at(&genuine);
    let (body, trailer) = genuine.split_at(at);
    std::fs::write(&mock_file, [&body[..body.len() - 4096], trailer].concat()).unwrap();
    mock_recompiled(&cache, "truncated body").await;

    // The genuine entry with one byte of its body changed, in the middle (its code), where
    // nothing but the digest would notice.
    let mut edited = std::fs::read(&mock_file).unwrap();
    let at = trailer_at(&edited);
    edited[at / 2] ^= 0xff;
    std::fs::write(&mock_file, &edited).unwrap();
    mock_recompiled(&cache, "edited body").await;

    // Nothing but a trailer.
    std::fs::write(&mock_file, trailer).unwrap();
    mock_recompiled(&cache, "trailer only").await;
}

#[tokio::test]
async fn a_cache_dir_others_can_write_to_is_refused_and_the_host_compiles_without_it() {
    for mode in [0o777, 0o770, 0o702] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        let (log, guard) = CapturedLog::start();
        let host = Host::new(cache_options(dir.path())).unwrap();
        drop(guard);
        let shown = dir.path().display().to_string();
        assert!(
            log.lines().iter().any(|l| l.contains("WARN")
                && l.contains(&shown)
                && l.contains("writable by")
                && l.contains("compiling without a cache")),
            "mode {mode:o}: no warning naming the directory and why:\n{}",
            log.lines().join("\n")
        );
        let toml = mock("good", "reply = \"fine\"");
        all_loaded(&host.load(&config(&toml)).await);
        serves(&host, "good", "fine").await;
        assert_eq!(stats(&host), (1, 0, 0), "mode {mode:o}");
        // A second host compiles again: nothing was cached.
        let again = Host::new(cache_options(dir.path())).unwrap();
        all_loaded(&again.load(&config(&toml)).await);
        serves(&again, "good", "fine").await;
        assert_eq!(stats(&again), (1, 0, 0), "mode {mode:o}");
        assert_eq!(
            everything_in(dir.path()),
            Vec::<PathBuf>::new(),
            "mode {mode:o}"
        );
        // The host did not change the directory's mode behind the user's back.
        let now = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(now, mode);
    }
}

#[tokio::test]
async fn a_cache_dir_owned_by_another_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Only root can give a directory away; elsewhere this case cannot be set up.
    if std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).is_err() {
        eprintln!("not root: cannot give a directory to another user; skipped");
        return;
    }
    let (log, guard) = CapturedLog::start();
    let host = Host::new(cache_options(dir.path())).unwrap();
    drop(guard);
    assert!(
        log.lines().iter().any(|l| l.contains("WARN")
            && l.contains(&dir.path().display().to_string())
            && l.contains("owned by uid 65534")),
        "{}",
        log.lines().join("\n")
    );
    all_loaded(&host.load(&config(&mock("good", "reply = \"fine\""))).await);
    serves(&host, "good", "fine").await;
    assert_eq!(stats(&host), (1, 0, 0));
    assert!(everything_in(dir.path()).is_empty());
}

#[tokio::test]
async fn the_cache_dir_the_host_creates_is_private() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("deep").join("er").join("cache");
    let host = Host::new(cache_options(&cache)).unwrap();
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "mode {mode:o}");
    all_loaded(&host.load(&config(&mock("good", "reply = \"fine\""))).await);
    serves(&host, "good", "fine").await;
    assert_eq!(stats(&host), (1, 0, 0));
    // Its artifacts are the user's alone too, and the next host uses them.
    let files = artifacts(&cache);
    assert_eq!(files.len(), 1);
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "artifact mode {mode:o}");
    let host = Host::new(cache_options(&cache)).unwrap();
    all_loaded(&host.load(&config(&mock("good", "reply = \"fine\""))).await);
    assert_eq!(stats(&host), (0, 1, 0));
    serves(&host, "good", "fine").await;
}

/// A mock provider entry (`name` = id) granted `host` as `/d`, read-write.
fn granted(id: &str, host: &Path) -> String {
    mock(id, "")
        + &format!(
            "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/d', write = true }}]\n\n",
            host.display()
        )
}

#[tokio::test]
async fn no_grant_can_reach_the_compile_cache() {
    let root = tempfile::tempdir().unwrap();
    let parent = root.path().join("parent");
    let cache = parent.join("cache");
    let host = Host::new(cache_options(&cache)).unwrap();
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&cache, &link).unwrap();
    let inside = cache.join("inside");
    std::fs::create_dir(&inside).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // A symlink into the cache's parent, with `..` through it, lands on the cache too.
    let dotted = root.path().join("link").join("..").join("cache");

    let toml = mock("good", "reply = \"fine\"")
        + &granted("at", &cache)
        + &granted("above", &parent)
        + &granted("link", &link)
        + &granted("inside", &inside)
        + &granted("dotted", &dotted)
        + &granted("elsewhere", elsewhere.path());
    let report = host.load(&config(&toml)).await;
    let errors: Vec<String> = report.failed.iter().map(|e| e.to_string()).collect();
    let ids: Vec<&str> = report.failed.iter().map(|e| e.id()).collect();
    assert_eq!(
        ids,
        ["at", "above", "link", "inside", "dotted"],
        "{errors:#?}"
    );
    for error in &errors {
        assert!(
            error.contains("key `grants.dirs[0].host`")
                && error.contains("would expose the compile cache"),
            "{error}"
        );
    }
    assert!(
        errors[1].contains("contains the compile cache"),
        "{}",
        errors[1]
    );
    assert!(
        errors[3].contains("is inside the compile cache"),
        "{}",
        errors[3]
    );
    assert_eq!(provider_names(&host), ["good", "elsewhere"]);
    serves(&host, "elsewhere", "mock reply").await;
    serves(&host, "good", "fine").await;

    // Without a cache there is nothing to guard.
    let mut options = test_options();
    options.engine.cache_dir = None;
    let host = Host::new(options).unwrap();
    all_loaded(&host.load(&config(&granted("at", &cache))).await);
    serves(&host, "at", "mock reply").await;
}
