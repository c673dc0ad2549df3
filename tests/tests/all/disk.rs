//! The disk quota of writable grants (`max_write_mb`, `max_files`): a plugin that writes,
//! creates files or grows sparse files through a writable `dirs` grant is refused with the WASI
//! error `quota` at its limit, what it leaves on disk stays within it, and a well-behaved
//! provider keeps serving meanwhile. Each is asserted against the WASI 0.2 and the WASI 0.3
//! hostile guest (`crate::hostile::Guest`).

use std::path::Path;

use crate::hostile::{assert_quiescent, good, Attacks, Guest, GUESTS};

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
/// The host refuses with the error code `quota` everywhere. The 0.2 guest sees it as `EDQUOT`
/// (`QuotaExceeded`, WASI errno 19) where the call returns an error code (creating a file,
/// `set_len`, a write at an offset past the quota); a refused *stream* write (how Rust's std
/// writes a file on wasip2) fails with `last-operation-failed`, which the guest's libc turns
/// into `EIO` without asking `filesystem-error-code` (it does not import it), so `write-big`
/// sees `EIO` (errno 29). The 0.3 guest sees the error code itself: its stream's writes end,
/// and the write's `future` says `quota`.
fn refused(guest: Guest, out: &str, prefix: &str) -> u64 {
    let (count, rest) = out
        .strip_prefix(prefix)
        .and_then(|s| s.split_once("; "))
        .unwrap_or_else(|| panic!("unexpected output: {out}"));
    let expected = match guest {
        Guest::P2 if prefix == "wrote " => "error Uncategorized (errno 29)",
        Guest::P2 => "error QuotaExceeded (errno 19)",
        Guest::P3 => "error ErrorCode::Quota",
    };
    assert!(
        rest.starts_with(expected),
        "not refused by the quota: {out}"
    );
    count.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_max_write_mb_are_refused_with_quota() {
    for guest in GUESTS {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let attack = |id: &str, mode: &str, bytes: u64| {
            guest.hostile(
                id,
                &format!("mode = \"{mode}\", path = \"/out/f\", bytes = {bytes}"),
                &(grant(root, id) + SMALL),
            )
        };
        let mut toml = good()
            + &attack("big", "write-big", 300 * MIB)
            + &attack("sparse", "sparse", 1 << 40)
            + &attack("seek", "sparse-seek", 1 << 40)
            + &attack("twice", "write-big", 700 << 10)
            + &guest.hostile(
                "small",
                "mode = \"write-file\", path = \"/out/small.txt\"",
                &(grant(root, "small") + SMALL),
            );
        // 0.3's `append-via-stream` is a function of its own (0.2's std appends through the
        // stream `write-big` uses).
        let mut floods = vec!["big"];
        if guest == Guest::P3 {
            toml += &attack("append", "append-big", 300 * MIB);
            floods.push("append");
        }
        let attacks = Attacks::load(&toml).await;

        // 300 MiB in 64 KiB chunks (0.3: at an offset or appended): stopped at the 1 MiB
        // quota, with `quota`.
        for id in floods {
            let out = attacks.attack(id).await;
            let wrote = refused(guest, &out, "wrote ");
            assert!(wrote <= MIB, "{guest:?} {id}: {out}");
            assert!(wrote >= MIB - (64 << 10), "{guest:?} {id}: {out}");
            assert!(
                bytes_under(&root.join(id).join("out")) <= MIB,
                "{guest:?} {id}"
            );
        }

        // A 1 TiB sparse file, by `set_len` and by writing past the end: its size counts.
        for id in ["sparse", "seek"] {
            let out = attacks.attack(id).await;
            assert_eq!(refused(guest, &out, "size "), 0, "{guest:?} {id}: {out}");
            assert!(
                bytes_under(&root.join(id).join("out")) <= MIB,
                "{guest:?} {id}"
            );
        }

        // The quota is the entry's, across its runs: a second 700 KiB does not fit.
        let first = attacks.attack("twice").await;
        assert_eq!(first, format!("wrote {}; ok", 700 << 10), "{guest:?}");
        let second = attacks.attack("twice").await;
        assert!(
            refused(guest, &second, "wrote ") < 400 << 10,
            "{guest:?}: {second}"
        );
        assert!(bytes_under(&root.join("twice/out")) <= MIB, "{guest:?}");

        // A small write through a writable grant works under the same limits.
        assert_eq!(attacks.attack("small").await, "ok: written", "{guest:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("small/out/small.txt")).unwrap(),
            "pwned"
        );
        assert_quiescent(&attacks.host);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_past_max_files_are_refused_with_quota() {
    for guest in GUESTS {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let toml = good()
            + &guest.hostile(
                "many",
                "mode = \"many-files\", path = \"/out\", count = 20000",
                &(grant(root, "many") + SMALL),
            )
            + &guest.hostile(
                "other",
                "mode = \"write-file\", path = \"/out/mine.txt\"",
                &(grant(root, "other") + SMALL),
            );
        let attacks = Attacks::load(&toml).await;
        let out = attacks.attack("many").await;
        assert_eq!(refused(guest, &out, "created "), 10, "{guest:?}: {out}");
        assert_eq!(files_under(&root.join("many/out")), 10);
        // Re-creating files that exist costs nothing; one more new one is still refused.
        let again = attacks.attack("many").await;
        assert_eq!(refused(guest, &again, "created "), 10, "{guest:?}: {again}");
        assert_eq!(files_under(&root.join("many/out")), 10);
        // Another entry has a quota of its own.
        assert_eq!(attacks.attack("other").await, "ok: written", "{guest:?}");
        assert_quiescent(&attacks.host);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_disk_quota_stops_the_floods() {
    for guest in GUESTS {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let toml = good()
            + &guest.hostile(
                "big",
                &format!(
                    "mode = \"write-big\", path = \"/out/f\", bytes = {}",
                    300 * MIB
                ),
                &grant(root, "big"),
            )
            + &guest.hostile(
                "many",
                "mode = \"many-files\", path = \"/out\", count = 20000",
                &grant(root, "many"),
            )
            + &guest.hostile(
                "sparse",
                &format!(
                    "mode = \"sparse\", path = \"/out/f\", bytes = {}",
                    1u64 << 40
                ),
                &grant(root, "sparse"),
            );
        let attacks = Attacks::load(&toml).await;
        let out = attacks.attack("big").await;
        assert!(
            refused(guest, &out, "wrote ") <= 64 * MIB,
            "{guest:?}: {out}"
        );
        assert!(bytes_under(&root.join("big/out")) <= 64 * MIB);
        let out = attacks.attack("many").await;
        assert_eq!(refused(guest, &out, "created "), 1_000, "{guest:?}: {out}");
        assert_eq!(files_under(&root.join("many/out")), 1_000);
        let out = attacks.attack("sparse").await;
        assert_eq!(refused(guest, &out, "size "), 0, "{guest:?}: {out}");
        assert_quiescent(&attacks.host);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_a_write_grant_is_unaffected() {
    for guest in GUESTS {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let toml = good()
            + &guest.hostile(
                "reader",
                "mode = \"read-file\", path = \"/data/readme.txt\"",
                &(grant(root, "reader") + SMALL),
            )
            + &guest.hostile(
                "ro",
                "mode = \"write-big\", path = \"/data/f\", bytes = 4096",
                &(grant(root, "ro") + SMALL),
            );
        let attacks = Attacks::load(&toml).await;
        // Reads count nothing, however often.
        for _ in 0..3 {
            assert_eq!(
                attacks.attack("reader").await,
                "ok: granted content",
                "{guest:?}"
            );
        }
        // A write to a read-only grant is refused as before, not by the quota.
        let out = attacks.attack("ro").await;
        assert!(out.starts_with("wrote 0; error "), "{guest:?}: {out}");
        assert!(!out.contains("Quota"), "{guest:?}: {out}");
        assert!(!root.join("ro/data/f").exists());
        assert_quiescent(&attacks.host);
    }
}
