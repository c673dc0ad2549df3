//! One agent process: spawned with a scrubbed environment in its own process group, spoken to
//! through a writer task, and always reaped: gracefully by [`AgentProcess::finish`], or by a
//! background reaper when the run's future is dropped (an enforced cancel, a timeout, dispose).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seam_core::live::{LiveCounts, ProcessGuard};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;

use super::rpc::LineReader;

/// How many of the agent's last stderr bytes a diagnostic quotes.
const STDERR_TAIL: usize = 2048;
/// Lines waiting to be written to the agent; past this the run waits for the agent to read.
const WRITE_QUEUE: usize = 64;

/// A spawned agent.
pub(crate) struct AgentProcess {
    child: Option<Child>,
    /// Dropping it ends the writer task, which closes the agent's stdin.
    writer: Option<mpsc::Sender<String>>,
    /// The agent's stdout, line by line.
    pub(crate) lines: LineReader<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<Tail>>,
    /// The process group (the agent's pid), for the escalation.
    group: Option<libc::pid_t>,
    grace: Duration,
    guard: Option<ProcessGuard>,
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

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
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

/// Where a program is: a path as given, or a bare name looked up on the host's PATH.
pub(crate) fn resolve(program: &str) -> Result<PathBuf, SpawnError> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| SpawnError::NotOnPath(program.to_string()))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl AgentProcess {
    /// Starts `argv` in `cwd` with exactly `env`, its stdout read in lines of at most
    /// `max_line` bytes. The process counts in `live` until it is reaped.
    pub(crate) fn spawn(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        max_line: usize,
        grace: Duration,
        live: &Arc<LiveCounts>,
    ) -> Result<Self, SpawnError> {
        let program = resolve(&argv[0])?;
        let mut command = Command::new(&program);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that the escalation reaches whatever the agent started too.
            .process_group(0);
        let mut child = command.spawn().map_err(|source| SpawnError::Os {
            program: argv[0].clone(),
            source,
        })?;
        let guard = live.process_guard();
        let group = child.id().and_then(|id| libc::pid_t::try_from(id).ok());
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SpawnError::Os {
                program: argv[0].clone(),
                source: std::io::Error::other("the process has no pipes"),
            });
        };
        let (writer, mut queue) = mpsc::channel::<String>(WRITE_QUEUE);
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(line) = queue.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
            // Dropping stdin closes it: the agent's cue to exit.
        });
        let tail = Arc::new(Mutex::new(Tail::default()));
        let sink = tail.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(&chunk[..n]);
            }
        });
        Ok(Self {
            child: Some(child),
            writer: Some(writer),
            lines: LineReader::new(BufReader::new(stdout), max_line),
            stderr: tail,
            group,
            grace,
            guard: Some(guard),
        })
    }

    /// Queues a line for the agent's stdin; `false` once the agent no longer reads.
    pub(crate) async fn send(&self, line: String) -> bool {
        match &self.writer {
            Some(writer) => writer.send(line).await.is_ok(),
            None => false,
        }
    }

    /// The last lines the agent wrote to stderr, trimmed, for a diagnostic.
    pub(crate) fn stderr_tail(&self) -> Option<String> {
        let tail = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        let text = String::from_utf8_lossy(&tail.bytes);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// How the process ended, if it ends within the grace (after its stdout closed).
    pub(crate) async fn exit_status(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        tokio::time::timeout(self.grace, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Ends the process: closes its stdin, then SIGTERM to its group after the grace, then
    /// SIGKILL after another; returns once it is reaped.
    pub(crate) async fn finish(mut self) {
        drop(self.writer.take());
        if let Some(child) = self.child.take() {
            reap(child, self.group, self.grace).await;
        }
        drop(self.guard.take());
    }
}

impl Drop for AgentProcess {
    /// The run was dropped with the process still up: reap it in the background, or at once
    /// with SIGKILL when no runtime is left to wait on.
    fn drop(&mut self) {
        drop(self.writer.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        let guard = self.guard.take();
        let (group, grace) = (self.group, self.grace);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    reap(child, group, grace).await;
                    drop(guard);
                });
            }
            Err(_) => {
                signal_group(group, libc::SIGKILL);
                let _ = child.start_kill();
                // Without a runtime, wait on a plain thread so the process is still reaped.
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        if !matches!(child.try_wait(), Ok(None)) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    drop(guard);
                });
            }
        }
    }
}

/// Waits for `child` to exit on its own, then escalates; the group gets a last SIGKILL so that
/// nothing the agent started outlives it.
async fn reap(mut child: Child, group: Option<libc::pid_t>, grace: Duration) {
    let exited = tokio::time::timeout(grace, child.wait()).await.is_ok();
    if !exited {
        signal_group(group, libc::SIGTERM);
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            signal_group(group, libc::SIGKILL);
            let _ = child.kill().await;
        }
    }
    let _ = child.wait().await;
    signal_group(group, libc::SIGKILL);
}

fn signal_group(group: Option<libc::pid_t>, signal: libc::c_int) {
    if let Some(pid) = group.filter(|pid| *pid > 1) {
        // SAFETY: kill(2) with a negative pid signals that process group; it touches no memory.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}
