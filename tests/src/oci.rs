//! A real OCI registry for the tests: Debian's `docker-registry` (the distribution registry,
//! which `make setup-kit` installs), on a loopback port it picks itself, with filesystem storage
//! in a temporary folder; plain HTTP, or basic auth and TLS from a CA the test makes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The registry binary.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A running registry.
pub struct TestRegistry {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// The CA that signed its certificate (PEM), when it speaks TLS.
    pub ca_file: Option<PathBuf>,
    /// Its user and password, when it asks for them.
    pub credentials: Option<(String, String)>,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl TestRegistry {
    /// A registry over plain HTTP, without authentication.
    pub fn start() -> Self {
        Self::spawn(false)
    }

    /// A registry over TLS (a certificate for 127.0.0.1 from a CA made here) asking for basic
    /// auth (`seam` / a random password).
    pub fn start_secure() -> Self {
        Self::spawn(true)
    }

    fn spawn(secure: bool) -> Self {
        assert!(
            Path::new(REGISTRY_BIN).is_file(),
            "{REGISTRY_BIN} is missing: run `make setup-kit`, which installs Debian's \
             docker-registry (apt-get install -y docker-registry)"
        );
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:0\n  secret: seam-tests\n",
            dir.path().join("data").display()
        );
        let (mut ca_file, mut credentials) = (None, None);
        if secure {
            let (ca, cert, key) = certificates(dir.path());
            text.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert.display(),
                key.display()
            ));
            let password = format!("pw-{}", std::process::id());
            let hash = bcrypt::hash(&password, 4).expect("a bcrypt hash");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("seam:{hash}\n")).expect("the htpasswd file");
            text.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: seam-tests\n    path: {}\n",
                htpasswd.display()
            ));
            ca_file = Some(ca);
            credentials = Some(("seam".to_string(), password));
        }
        let config = dir.path().join("config.yml");
        std::fs::write(&config, text).expect("the registry's config");
        let mut registry = Self {
            child: None,
            host: String::new(),
            ca_file,
            credentials,
            config,
            dir,
        };
        registry.run(None);
        registry
    }

    /// Starts the process (on `port`, or one it picks), waiting until it says it listens.
    fn run(&mut self, port: Option<u16>) {
        let config = match port {
            None => self.config.clone(),
            Some(port) => {
                let text = std::fs::read_to_string(&self.config).expect("the registry's config");
                let again = self.dir.path().join("config-again.yml");
                std::fs::write(
                    &again,
                    text.replace("127.0.0.1:0", &format!("127.0.0.1:{port}")),
                )
                .expect("the registry's config");
                again
            }
        };
        let mut child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("docker-registry starts");
        let lines = crate::lines_of(child.stderr.take().expect("its stderr"));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let host = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("docker-registry did not say it listens"));
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest
                    .split(|c: char| c == '"' || c == ',' || c.is_whitespace())
                    .next()
                    .unwrap_or_default()
                    .to_string();
            }
        };
        // Keep draining its log, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        self.host = host;
        self.child = Some(child);
    }

    /// Stops it (SIGKILL) and waits for it to be gone: the registry is down.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again, on the same port and storage.
    pub fn restart(&mut self) {
        self.stop();
        let port = self
            .host
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the registry's port");
        self.run(Some(port));
    }

    /// The file the registry keeps blob `hex` (a SHA-256 in hex) in: what a test swaps to play
    /// a registry whose storage was tampered with.
    pub fn blob_file(&self, hex: &str) -> PathBuf {
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A CA, and a certificate it signed for `127.0.0.1` and `localhost`, with its key: PEM files
/// in `dir` (the CA's, the certificate's, the key's).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Seam test registry CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("a CA key"))
        .expect("the CA certificate");
    let key = KeyPair::generate().expect("a server key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params")
        .signed_by(&key, &ca)
        .expect("the server certificate");
    let paths = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&paths.0, ca.pem()).expect("the CA file");
    std::fs::write(&paths.1, cert.pem()).expect("the certificate file");
    std::fs::write(&paths.2, key.serialize_pem()).expect("the key file");
    paths
}
