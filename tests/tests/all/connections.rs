//! What a plugin's connections may take of the host: at most `max_http_connections` wasi:http
//! requests in flight, over all its runs, and no origin reached through user information in the
//! authority. Each attack runs with a well-behaved plugin serving alongside.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use seam_host::StopReason;
use seam_tests::*;
use tokio::net::TcpListener;

use crate::hostile::{good, hostile, run_once, while_serving};

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
    let (sink, _) = server(false).await;
    let (web, answered) = server(true).await;
    let toml = hostile(
        "flood",
        &format!("mode = \"http-flood\", count = 200, authority = \"{sink}\""),
        &granted(&sink, "[plugin.limits]\nmax_http_connections = 8"),
    ) + &hostile(
        "polite",
        &format!("mode = \"http-get\", authority = \"{web}\""),
        &granted(&web, ""),
    ) + &good();
    let host = host_with(&toml).await;
    // Four runs of the flooding plugin at once share its eight connections.
    let floods = futures::future::join_all((0..4).map(|_| run_once(&host, "flood", request("x"))));
    let (results, served) = while_serving(&host, floods).await;
    assert!(served > 0);
    for result in &results {
        assert_eq!(result.stop_reason, StopReason::Error, "{result:?}");
        let diagnostic = result.diagnostic.as_deref().unwrap_or_default();
        assert!(
            diagnostic.contains("plugin `flood` hit its limit `max_http_connections`"),
            "{result:?}"
        );
    }
    // Another plugin's request to its own origin goes through, and the flood's slots came back
    // with its runs: a new run of it can open its eight again.
    let polite = run_once(&host, "polite", request("x")).await;
    assert_eq!(words(&polite), "status 200", "{polite:?}");
    assert!(answered.load(Ordering::SeqCst) >= 1);
    let again = run_once(&host, "flood", request("x")).await;
    assert!(
        again
            .diagnostic
            .as_deref()
            .unwrap_or_default()
            .contains("max_http_connections"),
        "{again:?}"
    );
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn a_connection_closed_gives_its_slot_back() {
    let (web, answered) = server(true).await;
    // Twenty requests one after the other, each answered and closed, with room for two.
    let toml = hostile(
        "polite",
        &format!("mode = \"http-get\", authority = \"{web}\""),
        &granted(&web, "[plugin.limits]\nmax_http_connections = 2"),
    );
    let host = host_with(&toml).await;
    for _ in 0..20 {
        let result = run_once(&host, "polite", request("x")).await;
        assert_eq!(words(&result), "status 200", "{result:?}");
    }
    assert_eq!(answered.load(Ordering::SeqCst), 20);
}

#[tokio::test]
async fn user_information_in_an_authority_reaches_no_origin() {
    let (granted_web, granted_hits) = server(true).await;
    let (other_web, other_hits) = server(true).await;
    // `granted@other`: a URL parser reads the host after the `@`, a sloppy check the one before.
    for (authority, hits) in [
        (format!("{other_web}@{granted_web}"), &granted_hits),
        (format!("{granted_web}@{other_web}"), &other_hits),
    ] {
        let toml = hostile(
            "sneaky",
            &format!("mode = \"http-get\", authority = \"{authority}\""),
            &granted(&granted_web, ""),
        ) + &good();
        let host = host_with(&toml).await;
        let (result, _) = while_serving(&host, run_once(&host, "sneaky", request("x"))).await;
        assert_eq!(
            words(&result),
            "refused: ErrorCode::HttpRequestDenied",
            "{authority}: {result:?}"
        );
        assert_eq!(hits.load(Ordering::SeqCst), 0, "{authority}");
    }
}
