//! What a plugin's connections may take of the host: at most `max_http_connections` wasi:http
//! requests in flight and sockets held, over all its runs, and no origin reached through user
//! information in the authority. Each attack runs with a well-behaved plugin serving alongside, and is made by the
//! WASI 0.2 and the WASI 0.3 hostile guest (`crate::hostile::Guest`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::hostile::{good, Attacks, Guest, GUESTS};

/// A loopback server that accepts connections and holds them, counting them; with `answer`, it
/// answers each request `200 hi` and closes.
async fn server(answer: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let authority = listener.local_addr().expect("an address").to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            if answer {
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = [0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi",
                        )
                        .await;
                });
            } else {
                held.push(socket);
            }
        }
    });
    (authority, accepted)
}

fn granted(authority: &str, limits: &str) -> String {
    format!("[plugin.grants]\nhttp = [\"http://{authority}\"]\n{limits}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_holds_at_most_its_connections_over_all_its_runs() {
    for guest in GUESTS {
        let (sink, _) = server(false).await;
        let (web, answered) = server(true).await;
        let toml = guest.hostile(
            "flood",
            &format!("mode = \"http-flood\", count = 200, authority = \"{sink}\""),
            &granted(&sink, "[plugin.limits]\nmax_http_connections = 8"),
        ) + &guest.hostile(
            "polite",
            &format!("mode = \"http-get\", authority = \"{web}\""),
            &granted(&web, ""),
        ) + &good();
        let attacks = Attacks::load(&toml).await;
        // Four runs (0.3: four calls) of the flooding plugin at once share its eight
        // connections.
        let floods = futures::future::join_all((0..4).map(|_| attacks.try_attack("flood"))).await;
        for flood in &floods {
            let why = flood.as_ref().expect_err("a flood ends at the cap");
            assert!(
                why.contains("plugin `flood` hit its limit `max_http_connections`"),
                "{guest:?}: {flood:?}"
            );
        }
        // Another plugin's request to its own origin goes through, and the flood's slots came
        // back with its runs: a new run of it can open its eight again.
        assert_eq!(attacks.attack("polite").await, "status 200", "{guest:?}");
        assert!(answered.load(Ordering::SeqCst) >= 1);
        let again = attacks.try_attack("flood").await;
        assert!(
            again
                .as_ref()
                .is_err_and(|why| why.contains("max_http_connections")),
            "{guest:?}: {again:?}"
        );
        assert_eq!(attacks.host.live_instances(), 0);
    }
}

/// A socket holds a slot too, until the guest drops it. (The 0.2 guest has no socket flood:
/// 0.2's sockets take their slots through the same `open_slot`.)
#[tokio::test]
async fn a_plugin_holds_at_most_its_connections_in_sockets_too() {
    let grant =
        "[plugin.grants]\nnetwork = [\"127.0.0.1:9\"]\n[plugin.limits]\nmax_http_connections = 8\n";
    let toml = Guest::P3.hostile("flood", "mode = \"socket-flood\", count = 20", grant)
        + &Guest::P3.hostile("eight", "mode = \"socket-flood\", count = 8", grant)
        + &good();
    let attacks = Attacks::load(&toml).await;
    let flood = attacks.try_attack("flood").await;
    assert!(
        flood
            .as_ref()
            .is_err_and(|why| why.contains("plugin `flood` hit its limit `max_http_connections`")),
        "{flood:?}"
    );
    // Eight fit, again and again: each call's sockets went with its store.
    for _ in 0..3 {
        assert_eq!(attacks.attack("eight").await, "opened 8");
    }
}

#[tokio::test]
async fn a_connection_closed_gives_its_slot_back() {
    for guest in GUESTS {
        let (web, answered) = server(true).await;
        // Twenty requests one after the other, each answered and closed, with room for two.
        let toml = guest.hostile(
            "polite",
            &format!("mode = \"http-get\", authority = \"{web}\""),
            &granted(&web, "[plugin.limits]\nmax_http_connections = 2"),
        ) + &good();
        let attacks = Attacks::load(&toml).await;
        for _ in 0..20 {
            assert_eq!(attacks.attack("polite").await, "status 200", "{guest:?}");
        }
        assert_eq!(answered.load(Ordering::SeqCst), 20, "{guest:?}");
    }
}

#[tokio::test]
async fn user_information_in_an_authority_reaches_no_origin() {
    for guest in GUESTS {
        let (granted_web, granted_hits) = server(true).await;
        let (other_web, other_hits) = server(true).await;
        // `granted@other`: a URL parser reads the host after the `@`, a sloppy check the one
        // before.
        for (authority, hits) in [
            (format!("{other_web}@{granted_web}"), &granted_hits),
            (format!("{granted_web}@{other_web}"), &other_hits),
        ] {
            let toml = guest.hostile(
                "sneaky",
                &format!("mode = \"http-get\", authority = \"{authority}\""),
                &granted(&granted_web, ""),
            ) + &good();
            let attacks = Attacks::load(&toml).await;
            assert_eq!(
                attacks.attack("sneaky").await,
                "refused: ErrorCode::HttpRequestDenied",
                "{guest:?} {authority}"
            );
            assert_eq!(hits.load(Ordering::SeqCst), 0, "{guest:?} {authority}");
        }
    }
    // Without user information, the granted origin answers the 0.3 guest: the refusals above
    // are the grant's.
    let (web, hits) = server(true).await;
    let toml = Guest::P3.hostile(
        "plain",
        &format!("mode = \"http-get\", authority = \"{web}\""),
        &granted(&web, ""),
    ) + &good();
    let attacks = Attacks::load(&toml).await;
    assert_eq!(attacks.attack("plain").await, "status 200");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}
