//! A guest's stdout and stderr, captured into `tracing` line by line with the plugin id.
//!
//! Lines are cut at [`MAX_LINE`] bytes, and every store has a log budget of [`LOG_BUDGET`] bytes
//! shared by stdout, stderr and the `host.log` import: past it, output is dropped (with one
//! warning), so a guest cannot flood the host's log or its memory.
//!
//! The last [`STDERR_TAIL`] bytes a store wrote to stderr are also kept (whatever the budget), so
//! that a fault can say what the guest printed just before it: a Rust guest prints its panic
//! message there before it traps.

use seam_core::sync::lock;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

pub use crate::sandbox::{LOG_BUDGET, MAX_LINE};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes of a store's latest stderr kept for its fault reports ([`LogBudget::stderr_tail`]).
pub const STDERR_TAIL: usize = 1024;
/// Lines of that tail a fault report shows at most.
const TAIL_LINES: usize = 4;
/// Bytes of the first line a store wrote to stderr kept for its fault reports: a runtime often
/// prints the cause first and a long stack after it (a JavaScript guest does).
const FIRST_LINE: usize = 256;
/// How much a guest may write in one go; writes are accepted at once, so this only bounds the
/// size of one host-side buffer.
const WRITE_PERMIT: usize = 64 * 1024;
/// Where captured output goes, for `RUST_LOG` filtering.
const TARGET: &str = "seam_host::guest";

/// The log budget of one store, and the tail of its stderr.
pub struct LogBudget {
    plugin: Arc<str>,
    remaining: AtomicUsize,
    exhausted: AtomicBool,
    /// The last [`STDERR_TAIL`] bytes written to stderr, as written (not cut into lines, not
    /// charged to the budget), and whether they begin inside a line.
    stderr: Mutex<(VecDeque<u8>, bool)>,
    /// The first non-blank line written to stderr (its first [`FIRST_LINE`] bytes), and whether
    /// it has ended.
    first: Mutex<(Vec<u8>, bool)>,
}

impl LogBudget {
    /// The budget of one of `plugin`'s stores.
    pub fn new(plugin: Arc<str>) -> Arc<Self> {
        Arc::new(Self {
            plugin,
            remaining: AtomicUsize::new(LOG_BUDGET),
            exhausted: AtomicBool::new(false),
            stderr: Mutex::new((VecDeque::new(), false)),
            first: Mutex::new((Vec::new(), false)),
        })
    }

    /// Keeps the first non-blank line of stderr.
    fn record_first(&self, bytes: &[u8]) {
        let mut guard = lock(&self.first);
        let (line, done) = &mut *guard;
        for &b in bytes {
            if *done {
                return;
            }
            if b == b'\n' {
                if line.iter().all(u8::is_ascii_whitespace) {
                    line.clear();
                } else {
                    *done = true;
                }
            } else if line.len() < FIRST_LINE {
                line.push(b);
            }
        }
    }

    /// Keeps the start and the end of what the guest wrote to stderr.
    fn record_stderr(&self, bytes: &[u8]) {
        self.record_first(bytes);
        let mut guard = lock(&self.stderr);
        let (tail, cut) = &mut *guard;
        let skip = bytes.len().saturating_sub(STDERR_TAIL);
        let excess = (tail.len() + bytes.len() - skip).saturating_sub(STDERR_TAIL);
        let last_dropped = if skip > 0 {
            Some(bytes[skip - 1])
        } else {
            excess.checked_sub(1).map(|i| tail[i])
        };
        if let Some(byte) = last_dropped {
            *cut = byte != b'\n';
        }
        tail.drain(..excess);
        tail.extend(&bytes[skip..]);
    }

    /// The last lines the guest wrote to stderr (at most [`TAIL_LINES`], from the last
    /// [`STDERR_TAIL`] bytes, a last line without its newline included), joined into one line
    /// with control characters blanked; `None` if it wrote nothing there but blank lines. The hint
    /// Rust prints after a panic message (`note: run with RUST_BACKTRACE=1 ...`) is left out.
    pub fn stderr_tail(&self) -> Option<String> {
        let (bytes, cut) = {
            let guard = lock(&self.stderr);
            (guard.0.iter().copied().collect::<Vec<u8>>(), guard.1)
        };
        let tail = render_tail(&bytes, cut);
        let first = {
            let guard = lock(&self.first);
            render_tail(&guard.0, false)
        };
        match (first, tail) {
            (Some(first), Some(tail)) if !tail.contains(&first) => {
                Some(format!("{first} … {tail}"))
            }
            (first, tail) => tail.or(first),
        }
    }

    /// Takes `n` bytes from the budget; false (and, the first time, a warning) when it is spent.
    pub fn take(&self, n: usize) -> bool {
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
pub enum Stdio {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// See [`LogBudget::stderr_tail`]; `cut` says the bytes may begin inside a line, which is then
/// marked with `…`.
fn render_tail(bytes: &[u8], cut: bool) -> Option<String> {
    // The bytes were cut by count, so a character may be split at either end: the front of a
    // tail that was cut, the back of a first line kept to its bound. Its pieces are dropped
    // rather than shown as replacement characters.
    let mut bytes = bytes;
    if cut {
        let partial = bytes
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        bytes = &bytes[partial..];
    }
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let b = bytes[len - back];
        if b & 0xC0 == 0xC0 {
            let needs = if b >= 0xF0 {
                4
            } else if b >= 0xE0 {
                3
            } else {
                2
            };
            if needs > back {
                bytes = &bytes[..len - back];
            }
            break;
        }
        if b & 0x80 == 0 {
            break;
        }
    }
    let text = String::from_utf8_lossy(bytes);
    let kept: Vec<String> = text
        .split('\n')
        .enumerate()
        .map(|(i, line)| (i, line.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE=1`"))
        .map(|(i, l)| {
            let blanked: String = l
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            if cut && i == 0 {
                format!("…{blanked}")
            } else {
                blanked
            }
        })
        .collect();
    let start = kept.len().saturating_sub(TAIL_LINES);
    let joined = kept[start..].join(" ");
    (!joined.is_empty()).then_some(joined)
}

struct LineSink {
    stream: Stdio,
    budget: Arc<LogBudget>,
    line: Vec<u8>,
    cut: bool,
}

impl LineSink {
    fn write(&mut self, mut bytes: &[u8]) {
        if self.stream == Stdio::Stderr {
            self.budget.record_stderr(bytes);
        }
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
pub struct GuestOutput(Arc<Mutex<LineSink>>);

impl GuestOutput {
    /// The sink of `stream`, logging within `budget`.
    pub fn new(stream: Stdio, budget: Arc<LogBudget>) -> Self {
        Self(Arc::new(Mutex::new(LineSink {
            stream,
            budget,
            line: Vec::new(),
            cut: false,
        })))
    }

    fn write(&self, bytes: &[u8]) {
        lock(&self.0).write(bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tail_of(writes: &[&[u8]]) -> Option<String> {
        let budget = LogBudget::new("p".into());
        let err = GuestOutput::new(Stdio::Stderr, budget.clone());
        let out = GuestOutput::new(Stdio::Stdout, budget.clone());
        out.write(b"stdout is not kept\n");
        for w in writes {
            err.write(w);
        }
        budget.stderr_tail()
    }

    #[test]
    fn the_tail_is_the_last_lines_of_stderr_on_one_line() {
        assert_eq!(tail_of(&[]), None);
        assert_eq!(tail_of(&[b"\n \n\r\n"]), None);
        let panic = b"\nthread '<unnamed>' panicked at src/lib.rs:10:5:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            tail_of(&[panic]).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:10:5: boom")
        );
        // A last line without its newline counts; so do lines written in pieces.
        assert_eq!(
            tail_of(&[b"one\ntw", b"o\nthree\x1b[31m"]).as_deref(),
            Some("one two three [31m")
        );
        let many: Vec<u8> = (0..10)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        // The first line, where a runtime often says what went wrong, comes first.
        assert_eq!(
            tail_of(&[&many]).as_deref(),
            Some("line 0 … line 6 line 7 line 8 line 9")
        );
        let js = b"\nexpected a string, received [object]\nStack:\n  a@app.js:1\n  b@app.js:2\n  c@app.js:3\n  d@app.js:4\n";
        assert_eq!(
            tail_of(&[js]).as_deref(),
            Some("expected a string, received [object] … a@app.js:1 b@app.js:2 c@app.js:3 d@app.js:4")
        );
    }

    #[test]
    fn the_tail_is_bounded_and_marks_a_line_it_cut() {
        let long = vec![b'x'; 3 * STDERR_TAIL];
        let tail = tail_of(&[b"first\n", &long, b"\nlast"]).unwrap();
        assert_eq!(
            tail,
            format!("first … …{} last", "x".repeat(STDERR_TAIL - 5))
        );
        // Dropped up to a newline: the first line kept is whole.
        let line = format!("{}\n", "y".repeat(STDERR_TAIL - 1));
        assert_eq!(
            tail_of(&[b"012345678\n", line.as_bytes()]),
            Some(format!("012345678 … {}", "y".repeat(STDERR_TAIL - 1)))
        );
        // The budget does not matter: the tail is kept after the log is full.
        let budget = LogBudget::new("p".into());
        assert!(!budget.take(LOG_BUDGET + 1));
        let err = GuestOutput::new(Stdio::Stderr, budget.clone());
        err.write(b"still kept");
        assert_eq!(budget.stderr_tail().as_deref(), Some("still kept"));
    }
}
