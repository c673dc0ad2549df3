//! One agent process: spawned with a scrubbed environment in a contained tree of its own
//! ([`crate::process`]), spoken to through a writer task, and always ended and reaped with
//! everything it started: gracefully by [`AgentProcess::finish`], or in the background when the
//! run's future is dropped (an enforced cancel, a timeout, dispose), or by
//! [`crate::process::shutdown`] when the program exits first.

use seam_core::sync::lock;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seam_core::live::LiveCounts;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdout, Command};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::rpc::LineReader;
use seam_process::Contained;

/// How many of the agent's last stderr bytes a diagnostic quotes.
const STDERR_TAIL: usize = 2048;
/// Lines waiting to be written to the agent; past this the run waits for the agent to read.
const WRITE_QUEUE: usize = 64;
/// Bytes of lines waiting for the agent's stdin, each charged [`LINE_OVERHEAD`] beyond its
/// text: an agent that asks for files and never reads the answers makes the host hold at most
/// this much (a line larger than all of it waits for the queue to be empty).
const WRITE_BYTES: usize = 8 << 20;
/// What one queued line costs beyond its text.
const LINE_OVERHEAD: usize = 256;

/// A spawned agent.
pub struct AgentProcess {
    /// The agent and everything it starts ([`crate::process`]): whatever ends the run, the
    /// whole tree is ended and reaped.
    tree: Option<Contained>,
    /// Dropping it ends the writer task, which closes the agent's stdin.
    writer: Option<mpsc::Sender<(String, OwnedSemaphorePermit)>>,
    /// The bytes left of [`WRITE_BYTES`]; a queued line holds its share until it is written.
    room: Arc<Semaphore>,
    /// The agent's stdout, line by line.
    pub lines: LineReader<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<Tail>>,
    /// True once stderr reached its end: everything the agent wrote there is in `stderr`.
    stderr_done: watch::Receiver<bool>,
}

/// The last bytes a stream wrote.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > STDERR_TAIL {
            let cut = self.bytes.len() - STDERR_TAIL;
            self.bytes.drain(..cut);
        }
    }
}

/// The text of a stderr tail, trimmed. The tail is cut by bytes: a character split at its start
/// is dropped, not shown as a replacement character.
fn tail_text(bytes: &[u8]) -> Option<String> {
    // The first byte that is not a UTF-8 continuation byte (0b10xx_xxxx).
    let start = bytes
        .iter()
        .position(|b| b & 0xC0 != 0x80)
        .unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[start..]);
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A bare program name that no PATH entry holds.
    #[error("`{0}` is not on PATH")]
    NotOnPath(String),
    /// The OS refused.
    #[error("cannot start `{program}`: {source}")]
    Os {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

impl AgentProcess {
    /// Starts `argv` in `cwd` with exactly `env`, its stdout read in lines of at most
    /// `max_line` bytes. The process counts in `live` until it is reaped.
    pub fn spawn(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        max_line: usize,
        grace: Duration,
        live: &Arc<LiveCounts>,
    ) -> Result<Self, SpawnError> {
        let program =
            seam_process::resolve(&argv[0]).map_err(|e| SpawnError::NotOnPath(e.program))?;
        let mut command = Command::new(&program);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let os = |source| SpawnError::Os {
            program: argv[0].clone(),
            source,
        };
        let mut tree = seam_process::spawn(&mut command, grace).map_err(os)?;
        tree.hold(live.process_guard());
        let pipes = tree
            .child_mut()
            .map(|c| (c.stdin.take(), c.stdout.take(), c.stderr.take()));
        let Some((Some(stdin), Some(stdout), Some(mut stderr))) = pipes else {
            return Err(os(std::io::Error::other("the process has no pipes")));
        };
        let (writer, mut queue) = mpsc::channel::<(String, OwnedSemaphorePermit)>(WRITE_QUEUE);
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some((line, _room)) = queue.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
            // Dropping stdin closes it: the agent's cue to exit.
        });
        let tail = Arc::new(Mutex::new(Tail::default()));
        let sink = tail.clone();
        let (stderr_read, stderr_done) = watch::channel(false);
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                lock(&sink).push(&chunk[..n]);
            }
            let _ = stderr_read.send(true);
        });
        Ok(Self {
            tree: Some(tree),
            writer: Some(writer),
            room: Arc::new(Semaphore::new(WRITE_BYTES)),
            lines: LineReader::new(BufReader::new(stdout), max_line),
            stderr: tail,
            stderr_done,
        })
    }

    /// Queues a line for the agent's stdin; `false` once the agent no longer reads.
    pub async fn send(&self, line: String) -> bool {
        let Some(writer) = &self.writer else {
            return false;
        };
        let cost = line.len().saturating_add(LINE_OVERHEAD).min(WRITE_BYTES);
        let Ok(room) = self
            .room
            .clone()
            .acquire_many_owned(u32::try_from(cost).unwrap_or(u32::MAX))
            .await
        else {
            return false;
        };
        writer.send((line, room)).await.is_ok()
    }

    /// Waits at most `within` for the agent's stderr to reach its end (a process that exited
    /// may still have lines in the pipe, such as why it exited), so that a diagnostic quotes
    /// them.
    pub async fn stderr_read(&mut self, within: Duration) {
        let _ = tokio::time::timeout(within, self.stderr_done.wait_for(|done| *done)).await;
    }

    /// The last lines the agent wrote to stderr, trimmed, for a diagnostic.
    pub fn stderr_tail(&self) -> Option<String> {
        tail_text(&lock(&self.stderr).bytes)
    }

    /// How the process ended, if it ends within `within` (after its stdout closed).
    pub async fn exit_status(&mut self, within: Duration) -> Option<ExitStatus> {
        self.tree.as_mut()?.wait_timeout(within).await
    }

    /// Ends the process and what it started: closes its stdin, then SIGTERM to its tree after
    /// the grace, then SIGKILL after another; returns once all of it is reaped.
    pub async fn finish(mut self) {
        let writer = self.writer.take();
        if let Some(tree) = self.tree.take() {
            tree.end(move || drop(writer)).await;
        }
    }
}

impl Drop for AgentProcess {
    /// The run was dropped with the process still up: its tree ends in the background
    /// ([`Contained`]'s drop), stdin closed first.
    fn drop(&mut self) {
        drop(self.writer.take());
        drop(self.tree.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_for_an_agent_that_does_not_read_are_bounded_by_bytes() {
        use futures::FutureExt;
        let live = Arc::new(LiveCounts::default());
        // An agent that never reads its stdin.
        let argv = ["sleep".to_string(), "30".to_string()];
        let agent = AgentProcess::spawn(
            &argv,
            &[],
            Path::new("/"),
            1 << 20,
            Duration::from_millis(10),
            &live,
        )
        .expect("sleep starts");
        let line = "x".repeat(1 << 20);
        // Nothing yields to the writer task here, so exactly what the budget holds is queued.
        let mut queued = 0;
        while agent.send(line.clone()).now_or_never() == Some(true) {
            queued += 1;
            assert!(queued < WRITE_QUEUE, "the queue is bounded by count only");
        }
        assert_eq!(queued, WRITE_BYTES / ((1 << 20) + LINE_OVERHEAD));
        agent.finish().await;
    }

    #[test]
    fn a_tail_cut_inside_a_character_drops_the_piece() {
        let mut tail = Tail::default();
        tail.push("x".repeat(STDERR_TAIL).as_bytes());
        // `é` is two bytes: the tail keeps only its second.
        tail.push("é!".as_bytes());
        tail.push("y".repeat(STDERR_TAIL - 2).as_bytes());
        assert_eq!(tail.bytes.len(), STDERR_TAIL);
        let text = tail_text(&tail.bytes).expect("text");
        assert!(text.starts_with('!'), "{text}");
        assert!(!text.contains('\u{fffd}'));
        assert_eq!(tail_text(b"  \n"), None);
    }
}
