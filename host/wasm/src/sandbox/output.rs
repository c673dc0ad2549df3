//! A guest's stdout and stderr, captured into `tracing` line by line with the plugin id.
//!
//! Lines are cut at [`MAX_LINE`] bytes, and every store has a log budget of [`LOG_BUDGET`] bytes
//! shared by stdout, stderr and the `host.log` import: past it, output is dropped (with one
//! warning), so a guest cannot flood the host's log or its memory.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Longest line of guest output logged; the rest of the line is cut.
pub const MAX_LINE: usize = 4096;
/// Bytes of output (stdout, stderr and `host.log` together) one store may log.
pub const LOG_BUDGET: usize = 256 * 1024;
/// How much a guest may write in one go; writes are accepted at once, so this only bounds the
/// size of one host-side buffer.
const WRITE_PERMIT: usize = 64 * 1024;
/// Where captured output goes, for `RUST_LOG` filtering.
const TARGET: &str = "seam_host::guest";

/// The log budget of one store.
pub(crate) struct LogBudget {
    plugin: Arc<str>,
    remaining: AtomicUsize,
    exhausted: AtomicBool,
}

impl LogBudget {
    pub(crate) fn new(plugin: Arc<str>) -> Arc<Self> {
        Arc::new(Self {
            plugin,
            remaining: AtomicUsize::new(LOG_BUDGET),
            exhausted: AtomicBool::new(false),
        })
    }

    /// Takes `n` bytes from the budget; false (and, the first time, a warning) when it is spent.
    pub(crate) fn take(&self, n: usize) -> bool {
        // Once a line did not fit, later (shorter) ones are dropped too: no gaps in the log.
        if self.exhausted.load(Ordering::Relaxed) {
            return false;
        }
        let ok = self
            .remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok();
        if !ok && !self.exhausted.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: TARGET,
                plugin = &*self.plugin,
                "the plugin's log budget of {LOG_BUDGET} bytes is spent; its further output is dropped"
            );
        }
        ok
    }
}

/// Which standard stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdio {
    Stdout,
    Stderr,
}

struct LineSink {
    stream: Stdio,
    budget: Arc<LogBudget>,
    line: Vec<u8>,
    cut: bool,
}

impl LineSink {
    fn write(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, rest, newline) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = MAX_LINE.saturating_sub(self.line.len());
            if part.len() > room {
                self.cut = true;
            }
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            if newline {
                self.emit();
            }
            bytes = rest;
        }
    }

    fn emit(&mut self) {
        let mut text = String::from_utf8_lossy(&self.line).into_owned();
        if text.ends_with('\r') {
            text.pop();
        }
        if self.cut {
            text.push_str(" [line cut]");
        }
        self.line.clear();
        self.cut = false;
        if !self.budget.take(text.len().max(1)) {
            return;
        }
        let plugin = &*self.budget.plugin;
        match self.stream {
            Stdio::Stdout => tracing::info!(target: TARGET, plugin, stream = "stdout", "{text}"),
            Stdio::Stderr => tracing::warn!(target: TARGET, plugin, stream = "stderr", "{text}"),
        }
    }
}

impl Drop for LineSink {
    fn drop(&mut self) {
        // A last line without a newline (a panic message, say) is still logged.
        if !self.line.is_empty() || self.cut {
            self.emit();
        }
    }
}

/// One of a store's standard output streams. Every WASI stream handle the guest gets for it
/// writes into the same line buffer.
#[derive(Clone)]
pub(crate) struct GuestOutput(Arc<Mutex<LineSink>>);

impl GuestOutput {
    pub(crate) fn new(stream: Stdio, budget: Arc<LogBudget>) -> Self {
        Self(Arc::new(Mutex::new(LineSink {
            stream,
            budget,
            line: Vec::new(),
            cut: false,
        })))
    }

    fn write(&self, bytes: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write(bytes);
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        GuestOutput::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
