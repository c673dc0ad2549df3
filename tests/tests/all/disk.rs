//! The disk quota of writable grants (`max_write_mb`, `max_files`): a plugin that writes,
//! creates files or grows sparse files through a writable `dirs` grant is refused with the WASI
//! error `quota` at its limit, what it leaves on disk stays within it, and a well-behaved
//! provider keeps serving meanwhile.

use std::path::Path;

use seam_tests::*;

use crate::hostile::{assert_quiescent, attack_output, good, hostile};

const MIB: u64 = 1 << 20;

/// A read-only `/data` and a writable `/out`, each entry its own folders under `root`.
fn grant(root: &Path, id: &str) -> String {
    let data = root.join(id).join("data");
    let out = root.join(id).join("out");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(data.join("readme.txt"), "granted content").unwrap();
    format!(
        "[plugin.grants]\ndirs = [{{ host = '{}', guest = '/data' }}, {{ host = '{}', guest = '/out', write = true }}]\n",
        data.display(),
        out.display()
    )
}

const SMALL: &str = "[plugin.limits]\nmax_write_mb = 1\nmax_files = 10\n";

/// Bytes of every file under `dir`, by their length (a sparse file counts by its size).
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// `PREFIX N; error ...` as `N`; the error must be the quota's.
///
/// The host refuses with the error code `quota` everywhere. A guest sees it as `EDQUOT`
/// (`QuotaExceeded`, WASI errno 19) where the call returns an error code (creating a file,
/// `set_len`, a write at an offset past the quota); a refused *stream* write (how Rust's std
/// writes a file on wasip2) fails with `last-operation-failed`, which the guest's libc turns
/// into `EIO` without asking `filesystem-error-code` (it does not import it), so `write-big`
/// sees `EIO` (errno 29).
fn refused(out: &str, prefix: &str) -> u64 {
    let (count, rest) = out
        .strip_prefix(prefix)
        .and_then(|s| s.split_once("; "))
        .unwrap_or_else(|| panic!("unexpected output: {out}"));
    let expected = if prefix == "wrote " {
        "error Uncategorized (errno 29)"
    } else {
        "error QuotaExceeded (errno 19)"
    };
    assert!(
        rest.starts_with(expected),
        "not refused by the quota: {out}"
    );
    count.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_max_write_mb_are_refused_with_quota() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let attack = |id: &str, mode: &str, bytes: u64| {
        hostile(
            id,
            &format!("mode = \"{mode}\", path = \"/out/f\", bytes = {bytes}"),
            &(grant(root, id) + SMALL),
        )
    };
    let toml = good()
        + &attack("big", "write-big", 300 * MIB)
        + &attack("sparse", "sparse", 1 << 40)
        + &attack("seek", "sparse-seek", 1 << 40)
        + &attack("twice", "write-big", 700 << 10)
        + &hostile(
            "small",
            "mode = \"write-file\", path = \"/out/small.txt\"",
            &(grant(root, "small") + SMALL),
        );
    let host = host_with(&toml).await;

    // 300 MiB in 64 KiB chunks: stopped at the 1 MiB quota, with `quota` (EDQUOT).
    let out = attack_output(&host, "big").await;
    let wrote = refused(&out, "wrote ");
    assert!(wrote <= MIB, "{out}");
    assert!(wrote >= MIB - (64 << 10), "{out}");
    assert!(bytes_under(&root.join("big/out")) <= MIB);

    // A 1 TiB sparse file, by `set_len` and by seeking past the end: its size counts.
    for id in ["sparse", "seek"] {
        let out = attack_output(&host, id).await;
        assert_eq!(refused(&out, "size "), 0, "{id}: {out}");
        assert!(bytes_under(&root.join(id).join("out")) <= MIB, "{id}");
    }

    // The quota is the entry's, across its runs: a second 700 KiB does not fit.
    let first = attack_output(&host, "twice").await;
    assert_eq!(first, format!("wrote {}; ok", 700 << 10));
    let second = attack_output(&host, "twice").await;
    assert!(refused(&second, "wrote ") < 400 << 10, "{second}");
    assert!(bytes_under(&root.join("twice/out")) <= MIB);

    // A small write through a writable grant works under the same limits.
    assert_eq!(attack_output(&host, "small").await, "ok: written");
    assert_eq!(
        std::fs::read_to_string(root.join("small/out/small.txt")).unwrap(),
        "pwned"
    );
    assert_quiescent(&host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_past_max_files_are_refused_with_quota() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let toml = good()
        + &hostile(
            "many",
            "mode = \"many-files\", path = \"/out\", count = 20000",
            &(grant(root, "many") + SMALL),
        )
        + &hostile(
            "other",
            "mode = \"write-file\", path = \"/out/mine.txt\"",
            &(grant(root, "other") + SMALL),
        );
    let host = host_with(&toml).await;
    let out = attack_output(&host, "many").await;
    assert_eq!(refused(&out, "created "), 10, "{out}");
    assert_eq!(files_under(&root.join("many/out")), 10);
    // Re-creating files that exist costs nothing; one more new one is still refused.
    let again = attack_output(&host, "many").await;
    assert_eq!(refused(&again, "created "), 10, "{again}");
    assert_eq!(files_under(&root.join("many/out")), 10);
    // Another entry has a quota of its own.
    assert_eq!(attack_output(&host, "other").await, "ok: written");
    assert_quiescent(&host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_disk_quota_stops_the_floods() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let toml = good()
        + &hostile(
            "big",
            &format!(
                "mode = \"write-big\", path = \"/out/f\", bytes = {}",
                300 * MIB
            ),
            &grant(root, "big"),
        )
        + &hostile(
            "many",
            "mode = \"many-files\", path = \"/out\", count = 20000",
            &grant(root, "many"),
        )
        + &hostile(
            "sparse",
            &format!(
                "mode = \"sparse\", path = \"/out/f\", bytes = {}",
                1u64 << 40
            ),
            &grant(root, "sparse"),
        );
    let host = host_with(&toml).await;
    let out = attack_output(&host, "big").await;
    assert!(refused(&out, "wrote ") <= 64 * MIB, "{out}");
    assert!(bytes_under(&root.join("big/out")) <= 64 * MIB);
    let out = attack_output(&host, "many").await;
    assert_eq!(refused(&out, "created "), 1_000, "{out}");
    assert_eq!(files_under(&root.join("many/out")), 1_000);
    let out = attack_output(&host, "sparse").await;
    assert_eq!(refused(&out, "size "), 0, "{out}");
    assert_quiescent(&host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_a_write_grant_is_unaffected() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let toml = good()
        + &hostile(
            "reader",
            "mode = \"read-file\", path = \"/data/readme.txt\"",
            &(grant(root, "reader") + SMALL),
        )
        + &hostile(
            "ro",
            "mode = \"write-big\", path = \"/data/f\", bytes = 4096",
            &(grant(root, "ro") + SMALL),
        );
    let host = host_with(&toml).await;
    // Reads count nothing, however often.
    for _ in 0..3 {
        assert_eq!(attack_output(&host, "reader").await, "ok: granted content");
    }
    // A write to a read-only grant is refused as before, not by the quota.
    let out = attack_output(&host, "ro").await;
    assert!(out.starts_with("wrote 0; error "), "{out}");
    assert!(!out.contains("Quota"), "{out}");
    assert!(!root.join("ro/data/f").exists());
    assert_quiescent(&host);
}
