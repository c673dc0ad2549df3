//! The host's descriptor reserve, end to end: whatever a plugin's own cap, plugins together never
//! take the last quarter of `seam`'s descriptors (at least 256). Run under a small
//! `ulimit -n`, so the reserve is what binds.

use std::net::TcpListener;
use std::process::Command;

#[test]
fn plugins_never_take_the_hosts_last_descriptors() {
    // A loopback sink that accepts and holds every connection.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let authority = listener.local_addr().expect("an address").to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for socket in listener.incoming().flatten() {
            held.push(socket);
        }
    });
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("seam.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"flood\"\ncomponent = \"{}\"\n\
             config = {{ name = \"flood\", mode = \"http-flood\", count = 300, authority = \"{authority}\" }}\n\
             [plugin.grants]\nhttp = [\"http://{authority}\"]\n\
             [plugin.limits]\nmax_http_connections = 100000\n",
            seam_tests::guest("hostile_provider").display()
        ),
    )
    .expect("write the config");
    // 400 descriptors: plugins may hold 400 - 256 = 144 of them.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 400 && exec '{}' delegate '{}' --provider flood --prompt x",
            env!("CARGO_BIN_EXE_seam"),
            config.display()
        ))
        .env(
            "SEAM_CACHE_DIR",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/seam-test-cache"),
        )
        .output()
        .expect("seam runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("opened 144; then ErrorCode::ConnectionLimitReached"),
        "the 145th request is refused, and the command goes on: {stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("while plugins hold all 144 descriptors the host gives them"),
        "{stderr}"
    );
}
