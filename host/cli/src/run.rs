//! `seam run CONFIG [PROMPT] [--model M] [--session ID] [--detach] [--tree] [--events] [--json]`:
//! a top-level agent
//! whose tools are the mounted tool plugins answers one prompt. Its session, the runs it
//! delegates and the event stream are kept in the session store (see `sessions`); `--session`
//! continues a kept session.

use seam_host::sync::lock;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use seam_host::{ContentBlock, Event, Host};
use tokio_util::sync::CancellationToken;

use super::{
    load_for_use, print_events, read_config, sessions, with_host_store, working_directory, EXIT_OK,
    EXIT_UNSUCCESSFUL,
};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// The prompt; defaults to `[agent] prompt` in the config.
    prompt: Option<String>,
    /// The model string of the top-level agent, overriding `[agent] model`.
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// Continue the kept session ID (`seam sessions list` shows them): the agent starts from
    /// its completed turns, and the prompt of a turn a crash cut short.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Print the whole event stream (agent, tool, subagent) as JSON lines on stderr.
    #[arg(long)]
    events: bool,
    /// Print the answer as a JSON object: `agent`, `output`, `stop-reason`, `structured`, and
    /// `diagnostic` (why the run failed or was stopped) when there is one.
    #[arg(long)]
    json: bool,
    /// Do not wait for background children still running when the turn ends: they are left
    /// `interrupted` in the session store, to be continued with `--session` (as Ctrl-C does
    /// while they are waited for).
    #[arg(long)]
    detach: bool,
    /// Print the delegation tree on stderr when the command ends: each run under the run or
    /// agent that started it, with its provider, duration and how it ended (`✗` marks a failed
    /// run and the branch above it).
    #[arg(long)]
    tree: bool,
    /// Write the command's runs, turns and tool calls to FILE as Chrome trace-event JSON (open
    /// it in ui.perfetto.dev).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write the session's recording to FILE as a self-contained cassette (its config, its
    /// prompts, every recorded input): `seam replay FILE` plays it back with no key and no
    /// network.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Fail if the config's lock file would change (an `oci://` entry without a lock line, or
    /// a stale line), before anything is loaded.
    #[arg(long)]
    locked: bool,
}

/// The diagnostic of a background child `seam run` let go of.
const DETACHED: &str = "interrupted: `seam run` ended before it (--detach or Ctrl-C); \
                        send_message continues it in a later `seam run --session`";

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let config = read_config(&args.config)?;
    if args.locked {
        crate::oci::ensure_locked(&config, &args.config)?;
    }
    let prompt = args
        .prompt
        .clone()
        .or_else(|| config.agent.prompt.clone())
        .context("no prompt: give one on the command line or set `prompt` under [agent]")?;
    let cwd = working_directory()?;
    // Opened first: a store that cannot be written fails the command before anything runs.
    let store = sessions::open(
        config.sessions.store.as_ref(),
        &config.sessions,
        config.cluster.as_ref(),
    )?;
    if let Some(id) = &args.session {
        if store.store.session(id)?.is_none() {
            anyhow::bail!(
                "no session `{id}` in {} (`seam sessions list` shows them)",
                store.name
            );
        }
    }
    with_host_store(store.store.clone(), |host| async move {
        load_for_use(&host, &config, &interrupt).await?;
        let listener = args.events.then(|| print_events(&host));
        let progress =
            (!args.events && std::io::stderr().is_terminal()).then(|| Progress::start(&host));
        // A person at the terminal answers the tree's requests for approval.
        let _terminal = std::io::stdin().is_terminal().then(|| {
            host.subagents()
                .approvals()
                .add_surface(Arc::new(super::approvals::Terminal::default()))
        });
        let outcome = answer(&host, &args, &cwd, prompt, interrupt, progress).await;
        // Printed until the plugins are unloaded: the end of every run shows.
        host.unload_all().await;
        if let Some(id) = listener {
            host.events().unsubscribe(id);
        }
        // A write the store failed ends the command in error, naming the store, whatever the
        // agent answered: the events after it were not printed (nor are they in the store).
        if let Some(failure) = host.events().store_failure() {
            outcome?;
            return Err(anyhow::Error::new(failure)
                .context("the events after a write the session store failed were not delivered"));
        }
        outcome
    })
    .await
}

async fn answer(
    host: &Host,
    args: &Args,
    cwd: &str,
    prompt: String,
    interrupt: CancellationToken,
    progress: Option<Progress>,
) -> Result<u8> {
    let agent = host
        .create_agent_in(args.model.as_deref(), cwd, args.session.as_deref())
        .context("cannot create the top-level agent")?;
    let session = agent.as_parent().session_id;
    // What the recording ran with, for `seam replay SESSION` to run it again.
    if let Some((tape, key)) = agent.account().tape() {
        let meta = super::cassette::Meta {
            config: std::path::absolute(&args.config).unwrap_or_else(|_| args.config.clone()),
            model: args.model.clone(),
            working_directory: cwd.to_string(),
        };
        if let Ok(body) = serde_json::to_value(meta) {
            tape.record(&key, seam_host::cassette::Kind::Meta, body);
        }
    } else if args.record.is_some() {
        anyhow::bail!(
            "--record needs the session to be recorded: the config says `[recording] enabled = \
             false`"
        );
    }
    let pictures = crate::pictures::Pictures::start(host, args.tree, args.trace.as_deref());
    // Ctrl-C aborts the whole tree: the agent's model call, its tool calls, their runs; the
    // background children going are left interrupted, to be continued.
    let watcher = {
        let agent = agent.clone();
        let interrupt = interrupt.clone();
        let host = host.clone();
        tokio::spawn(async move {
            interrupt.cancelled().await;
            host.subagents().detach_background_of(agent.id(), DETACHED);
            agent.abort();
        })
    };
    let outcome = agent.run_turn(vec![ContentBlock::text(prompt)]).await;
    let left = if args.detach {
        // Left once each child exists (or failed to): a run let go of before its child was
        // created would leave nothing to continue.
        tokio::select! {
            () = started(host, agent.id()) => {}
            () = interrupt.cancelled() => {}
        }
        host.subagents().detach_background_of(agent.id(), DETACHED)
    } else {
        wait_for_background(host, agent.id(), &session, &interrupt, progress.as_ref()).await;
        if interrupt.is_cancelled() {
            // A child that is about to exist is given a moment to, so that it can be
            // continued; a provider that never gets there does not hold the exit up.
            let _ = tokio::time::timeout(STARTING, started(host, agent.id())).await;
            host.subagents().detach_background_of(agent.id(), DETACHED)
        } else {
            Vec::new()
        }
    };
    watcher.abort();
    // What the tree spent, its background children included, and what its budget has left.
    let spent = agent.account().spent();
    let budget = agent.account().limits();
    let remaining = agent.account().remaining().as_budget();
    if let (Some(file), Some((tape, _))) = (&args.record, agent.account().tape()) {
        let store = host.events().store().clone();
        store.flush()?;
        let cassette =
            super::cassette::cassette(store.as_ref(), &session, &args.config, tape.gaps())?;
        let text = serde_json::to_string_pretty(&cassette)?;
        std::fs::write(file, text)
            .with_context(|| format!("cannot write the cassette `{}`", file.display()))?;
    }
    host.agents().dispose(agent.id()).await;
    // The progress line is erased (and its ticker has stopped writing) before the answer.
    if let Some(p) = progress {
        p.stop(host).await;
    }

    if let Some(pictures) = pictures {
        pictures.finish(host, agent.id(), Some(&outcome.stop_reason), "seam run")?;
    }
    if !left.is_empty() {
        errln!(
            "{} left interrupted ({}): continue with --session {session}",
            match left.len() {
                1 => "1 background run".to_string(),
                n => format!("{n} background runs"),
            },
            runs_named(&left)
        );
    }
    let text = seam_host::blocks_text(&outcome.output);
    if args.json {
        let mut json = serde_json::json!({
            "agent": agent.id(),
            "session": session,
            "stop-reason": outcome.stop_reason.as_str(),
            "output": text,
            "structured": outcome.structured,
            "spent": spent.report(),
        });
        if !budget.is_unbounded() {
            json["budget"] = serde_json::json!(budget);
            json["remaining"] = serde_json::json!(remaining);
        }
        // Why the run failed or was stopped, for a program reading the answer.
        if let Some(why) = &outcome.diagnostic {
            json["diagnostic"] = serde_json::Value::String(why.clone());
        }
        outln!("{json}");
    } else {
        outln!("{text}");
        if std::io::stderr().is_terminal() {
            errln!("(session {session}: continue it with --session {session})");
        }
    }
    if outcome.stop_reason.is_success() {
        Ok(EXIT_OK)
    } else {
        match &outcome.diagnostic {
            Some(why) => errln!(
                "the agent ended with stop reason `{}`: {why}",
                outcome.stop_reason
            ),
            None => errln!("the agent ended with stop reason `{}`", outcome.stop_reason),
        }
        Ok(EXIT_UNSUCCESSFUL)
    }
}

/// How long Ctrl-C lets the background children that are starting get there.
const STARTING: Duration = Duration::from_secs(5);

/// Until each of `agent`'s background runs has its child (or failed to get one).
async fn started(host: &Host, agent: &str) {
    let starting = host
        .subagents()
        .background_runs(agent)
        .into_iter()
        .filter_map(|r| host.subagents().background_run(agent, &r.id))
        .map(|(run, _)| async move {
            let _ = run.started().await;
        });
    futures::future::join_all(starting).await;
}

/// `spawn-1 (label), ...`.
fn runs_named(runs: &[seam_host::RunInfo]) -> String {
    runs.iter()
        .map(|r| {
            if r.label.is_empty() {
                format!("`{}`", r.id)
            } else {
                format!("`{}` {}", r.id, r.label)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Waits until every background run of `agent` has settled, or the user interrupts, saying
/// what it waits for: on the progress line on a terminal, else once on stderr.
pub(crate) async fn wait_for_background(
    host: &Host,
    agent: &str,
    session: &str,
    interrupt: &CancellationToken,
    progress: Option<&Progress>,
) {
    let going = || {
        host.subagents()
            .background_runs(agent)
            .into_iter()
            .filter(|r| r.state != seam_host::RunState::Settled)
            .collect::<Vec<_>>()
    };
    let mut told = false;
    loop {
        let runs = going();
        if runs.is_empty() {
            break;
        }
        let line = format!(
            "waiting for {} ({}); Ctrl-C leaves {} interrupted, to continue with --session {session}",
            match runs.len() {
                1 => "1 background run".to_string(),
                n => format!("{n} background runs"),
            },
            runs_named(&runs),
            if runs.len() == 1 { "it" } else { "them" },
        );
        match progress {
            Some(p) => p.say(line),
            None if !told => errln!("{line}"),
            None => {}
        }
        told = true;
        // Woken when one of them has its result (its end event comes just before it).
        let results: Vec<_> = runs
            .iter()
            .filter_map(|r| host.subagents().background_run(agent, &r.id))
            .map(|(run, _)| run.result())
            .collect();
        if results.is_empty() {
            break;
        }
        tokio::select! {
            () = interrupt.cancelled() => break,
            _ = futures::future::select_all(results) => {}
        }
    }
}

/// A one-line spinner on stderr saying what the agent tree is doing: the latest step, how
/// many runs are going, and the one that has run longest, for how long.
pub(crate) struct Progress {
    status: Arc<Mutex<String>>,
    listener: seam_host::ListenerId,
    ticker: tokio::task::JoinHandle<()>,
    done: CancellationToken,
}

/// The runs going, by id, with when each started.
type Going = Arc<Mutex<Vec<(String, std::time::Instant)>>>;

/// What the spinner says of the runs going.
fn going_text(going: &[(String, std::time::Instant)], now: std::time::Instant) -> String {
    let Some((id, since)) = going.iter().min_by_key(|(_, since)| *since) else {
        return String::new();
    };
    let took = now.saturating_duration_since(*since).as_secs_f64();
    match going.len() {
        1 => format!(" · 1 run going ({id}, {took:.1} s)"),
        n => format!(" · {n} runs going (longest {id}, {took:.1} s)"),
    }
}

impl Progress {
    fn start(host: &Host) -> Self {
        let status = Arc::new(Mutex::new(String::from("thinking")));
        let status_line = status.clone();
        let sink = status.clone();
        let going: Going = Arc::default();
        let runs = going.clone();
        let listener = host.events().subscribe(move |event| {
            match &event {
                Event::SubagentStart { id, .. } => {
                    lock(&runs).push((id.clone(), std::time::Instant::now()))
                }
                Event::SubagentEnd { id, .. } => lock(&runs).retain(|(r, _)| r != id),
                _ => {}
            }
            let line = match &event {
                Event::AgentToolCall { id, tool, .. } => format!("{id}: calling `{tool}`"),
                Event::SubagentStart { provider, id, .. } => format!("{id}: child on `{provider}`"),
                Event::SubagentProgress { id, content, .. } => {
                    let text = seam_host::blocks_text(content);
                    let first = text.lines().next().unwrap_or("").chars().take(60);
                    format!("{id}: {}", first.collect::<String>())
                }
                Event::SubagentEnd {
                    id, stop_reason, ..
                } => format!("{id}: {stop_reason}"),
                Event::AgentTurnStart { id, .. } => format!("{id}: thinking"),
                _ => return Ok(()),
            };
            *lock(&sink) = line;
            Ok(())
        });
        let done = CancellationToken::new();
        let stopped = done.clone();
        let ticker = tokio::spawn(async move {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            for frame in FRAMES.iter().cycle() {
                let line = lock(&status).clone();
                let suffix = going_text(&lock(&going), std::time::Instant::now());
                {
                    use std::io::Write as _;
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{frame} {line}{suffix}");
                    let _ = err.flush();
                }
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(120)) => {}
                }
            }
        });
        Self {
            status: status_line,
            listener,
            ticker,
            done,
        }
    }

    /// Shows `line` until the next event changes it.
    fn say(&self, line: String) {
        *lock(&self.status) = line;
    }

    /// Stops the ticker, waits until it can write no more, and erases the line.
    async fn stop(self, host: &Host) {
        self.done.cancel();
        let _ = self.ticker.await;
        host.events().unsubscribe(self.listener);
        use std::io::Write as _;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::going_text;
    use std::time::{Duration, Instant};

    #[test]
    fn the_spinner_names_the_longest_run_and_how_long_it_has_gone() {
        let now = Instant::now();
        assert_eq!(going_text(&[], now), "");
        let one = vec![("spawn-1".to_string(), now - Duration::from_millis(2_500))];
        assert_eq!(going_text(&one, now), " · 1 run going (spawn-1, 2.5 s)");
        let two = vec![
            ("spawn-2".to_string(), now - Duration::from_millis(300)),
            ("spawn-1".to_string(), now - Duration::from_millis(4_000)),
        ];
        assert_eq!(
            going_text(&two, now),
            " · 2 runs going (longest spawn-1, 4.0 s)"
        );
    }
}
