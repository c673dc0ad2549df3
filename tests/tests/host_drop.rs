//! Dropping a host gives back its engine: the pooling allocator's reservations (thousands of
//! mappings) are released. Its own test binary, because it counts the process's mappings.

use seam_tests::{host_with, mock, test_host};

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_dropped_host_releases_its_memory_pool() {
    let before = mappings();
    let idle = test_host();
    let loaded = host_with(&(mock("m", "") + &seam_tests::entry("s", "spawn_provider", ""))).await;
    let run = loaded
        .subagents()
        .start("m", seam_tests::request("x"))
        .unwrap();
    run.result().await.unwrap();
    run.dispose().await;
    assert!(mappings() > before + 1000, "the pools are mapped");
    drop(idle);
    drop(loaded);
    // The epoch ticker notices within one tick. The mappings are the kernel's: no event says
    // they went, so this polls them.
    assert!(
        seam_tests::eventually(|| mappings() < before + 100).await,
        "{} mappings left of {before}",
        mappings()
    );
}
