//! The compile cache is bounded: past its cap the least recently used artifacts go, a hit counts
//! as a use, and `prune_cache` / `clear_cache` (what `seam cache` runs) trim it on demand.

use std::path::Path;

use seam_host::{cache_entries, clear_cache, prune_cache, Host, HostOptions};
use seam_tests::*;

fn capped(dir: &Path, max_bytes: u64) -> Host {
    let mut options: HostOptions = test_options();
    options.engine.cache_dir = Some(dir.to_path_buf());
    options.engine.cache_max_bytes = max_bytes;
    Host::new(options).unwrap()
}

/// Artifact sizes of `guests`, compiled into a fresh unbounded cache.
async fn sizes(guests: &[&str]) -> Vec<u64> {
    let dir = tempfile::tempdir().unwrap();
    let host = capped(dir.path(), u64::MAX);
    let mut out = Vec::new();
    for g in guests {
        assert!(!host.precompile(&guest(g)).await.unwrap(), "{g}: compiled");
        let newest = cache_entries(dir.path()).unwrap();
        let total: u64 = newest.iter().map(|e| e.bytes).sum();
        out.push(total - out.iter().sum::<u64>());
    }
    out
}

#[tokio::test]
async fn past_its_cap_the_cache_drops_the_least_recently_used() {
    let mut guests = vec!["subagent_tool", "spawn_provider", "observer_probe"];
    let measured = sizes(&guests).await;
    // Order them: `b` the largest, `c` the smallest, `a` in between.
    let mut by_size: Vec<(u64, &str)> = measured.into_iter().zip(guests.drain(..)).collect();
    by_size.sort();
    let [(s_c, c), (s_a, a), (s_b, b)] = [by_size[0], by_size[1], by_size[2]];
    assert!(s_c <= s_b);

    let dir = tempfile::tempdir().unwrap();
    let host = capped(dir.path(), s_a + s_b);
    let names = |dir: &Path| -> Vec<u64> {
        cache_entries(dir)
            .unwrap()
            .iter()
            .map(|e| e.bytes)
            .collect()
    };
    assert!(!host.precompile(&guest(a)).await.unwrap());
    assert!(!host.precompile(&guest(b)).await.unwrap());
    // Both were used an hour ago, as far as the cache can tell; a hit on `a` then makes `b`
    // the least recently used.
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in cache_entries(dir.path()).unwrap() {
        let file = std::fs::File::options().append(true).open(&e.path).unwrap();
        file.set_modified(an_hour_ago).unwrap();
    }
    assert!(host.precompile(&guest(a)).await.unwrap(), "a hit");
    assert_eq!(names(dir.path()).len(), 2);
    // `c` does not fit beside both: `b` goes, `a` (used since) and `c` (just written) stay.
    assert!(!host.precompile(&guest(c)).await.unwrap());
    let left = cache_entries(dir.path()).unwrap();
    let total: u64 = left.iter().map(|e| e.bytes).sum();
    assert!(total <= s_a + s_b, "{left:?}");
    let mut sizes_left: Vec<u64> = left.iter().map(|e| e.bytes).collect();
    sizes_left.sort();
    assert_eq!(sizes_left, vec![s_c, s_a], "{left:?}");
    // And `a` is still a hit.
    assert!(host.precompile(&guest(a)).await.unwrap());

    // On demand: prune to the newest one, then clear.
    let removed = prune_cache(dir.path(), s_a.max(s_c), None).unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(cache_entries(dir.path()).unwrap().len(), 1);
    assert_eq!(clear_cache(dir.path()).unwrap().len(), 1);
    assert!(cache_entries(dir.path()).unwrap().is_empty());
    // An empty cache compiles again, and keeps serving.
    assert!(!host.precompile(&guest(a)).await.unwrap());
}
