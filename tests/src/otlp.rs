//! The OTLP/HTTP receiver of the trace tests (`tests/fixtures/otlp_receiver.py`, decoding with
//! the official protobuf definitions), on a loopback port it picks itself.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running receiver, writing what it receives to a JSON-lines file.
pub struct OtlpReceiver {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    out: PathBuf,
}

impl OtlpReceiver {
    /// Starts one writing to `out`, waiting until it listens.
    pub fn start(out: &Path) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/otlp_receiver.py");
        let mut child = Command::new(crate::acp_python())
            .arg(script)
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let lines = crate::lines_of(child.stdout.take().expect("stdout"));
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the receiver says where it listens");
        let port = line
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line:?}"));
        Self {
            child,
            port,
            out: out.to_path_buf(),
        }
    }

    /// Its endpoint, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every line it wrote so far, parsed.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
