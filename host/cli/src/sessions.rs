//! `seam sessions list | show ID | events ID | tree ID | rm ID | gc --older-than D`, and the
//! store every command that keeps sessions opens (`seam run`).
//!
//! The store is `[sessions] store` of the config when given (`"memory"`, `"sqlite:PATH"`, or
//! `"nats"` for the JetStream of its `[cluster]`), else the SQLite file `$XDG_STATE_HOME/seam/sessions.db` (`~/.local/state/seam/...`). It is
//! opened before anything runs, so that a store that cannot be written fails the command at
//! its start, naming the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use seam_host::cluster::{ClusterConfig, JetStreamStore};
use seam_host::config::{SessionsConfig, StoreSpec};
use seam_host::session_store::{now_ms, MemoryStore, SessionStore, SqliteStore, StoreLimits};

use super::{read_config, EXIT_OK};

/// The session store a command uses, and what to call it in messages.
pub(crate) struct OpenStore {
    /// The store.
    pub(crate) store: Arc<dyn SessionStore>,
    /// `memory`, the database file, or the NATS server and cluster.
    pub(crate) name: String,
}

/// The CLI's default database: `$XDG_STATE_HOME/seam/sessions.db`, else
/// `~/.local/state/seam/sessions.db`.
fn default_path() -> Result<PathBuf> {
    let state = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .context("neither XDG_STATE_HOME nor HOME is set: set `[sessions] store`")?;
            Path::new(&home).join(".local").join("state")
        }
    };
    Ok(state.join("seam").join("sessions.db"))
}

/// Opens the store `spec` names (the default file when `None`), applying `config`'s limits and
/// its retention; `cluster` is the config's `[cluster]`, which `"nats"` needs.
pub(crate) fn open(
    spec: Option<&StoreSpec>,
    config: &SessionsConfig,
    cluster: Option<&ClusterConfig>,
) -> Result<OpenStore> {
    let limits = StoreLimits {
        max_session_bytes: config.max_session_mb.saturating_mul(1024 * 1024),
    };
    let (store, name): (Arc<dyn SessionStore>, String) = match spec {
        Some(StoreSpec::Memory) => {
            return Ok(OpenStore {
                store: Arc::new(MemoryStore::new(limits)),
                name: "memory".into(),
            })
        }
        Some(StoreSpec::Nats) => {
            let cluster = cluster.context(
                "the session store \"nats\" is the JetStream of a [cluster]: give a config \
                 that has one (`--config`)",
            )?;
            let store = JetStreamStore::open(cluster, limits)?;
            let name = store.name().to_string();
            (Arc::new(store), name)
        }
        Some(StoreSpec::Sqlite(path)) => sqlite(path, limits)?,
        None => sqlite(&default_path()?, limits)?,
    };
    if config.retain_days > 0 {
        let cutoff = now_ms().saturating_sub(config.retain_days.saturating_mul(86_400_000));
        let gone = store
            .gc(cutoff)
            .with_context(|| format!("cannot apply `[sessions] retain_days` to {name}"))?;
        if gone > 0 {
            tracing::info!(
                gone,
                days = config.retain_days,
                "sessions past their retention removed"
            );
        }
    }
    Ok(OpenStore { store, name })
}

fn sqlite(path: &Path, limits: StoreLimits) -> Result<(Arc<dyn SessionStore>, String)> {
    let store = SqliteStore::open(path, limits)?;
    Ok((Arc::new(store), path.display().to_string()))
}

/// Opens the store `--store` names, else the one `--config`'s `[sessions]` names, else the
/// default file, for a command that reads it (retention is for the commands that write).
pub(crate) fn open_named(store: Option<&str>, config: Option<&Path>) -> Result<OpenStore> {
    let (config, cluster, base) = match config {
        Some(path) => {
            let whole = read_config(path)?;
            (
                whole.sessions,
                whole.cluster,
                path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            )
        }
        None => (SessionsConfig::default(), None, PathBuf::from(".")),
    };
    let spec = match store {
        Some(text) => {
            Some(StoreSpec::parse(text, &base).map_err(|e| anyhow::anyhow!("--store: {e}"))?)
        }
        None => config.store.clone(),
    };
    let config = SessionsConfig {
        retain_days: 0,
        ..config
    };
    open(spec.as_ref(), &config, cluster.as_ref())
}

/// Which store a command that reads it opens, and how it prints (`seam sessions`, `seam
/// approvals`).
#[derive(Debug, clap::Args)]
pub(crate) struct StoreArgs {
    /// The store: `sqlite:PATH`, `memory`, or `nats` (the JetStream of `--config`'s
    /// `[cluster]`) (default: `[sessions] store` of `--config`, else
    /// $XDG_STATE_HOME/seam/sessions.db).
    #[arg(long, value_name = "STORE", global = true)]
    pub(crate) store: Option<String>,
    /// A config whose `[sessions]` names the store.
    #[arg(long, value_name = "CONFIG", global = true)]
    pub(crate) config: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

impl StoreArgs {
    /// The store they name.
    pub(crate) fn open(&self) -> Result<OpenStore> {
        open_named(self.store.as_deref(), self.config.as_deref())
    }
}

/// `seam sessions`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SessionsCommand {
    /// List the top-level sessions, most recent first.
    List,
    /// Print a session's events.
    Show {
        /// The session id.
        id: String,
    },
    /// Print the event stream kept for a session: the JSON lines `--events` printed, in the
    /// order the store wrote them, from each process that ran it (from when it opened the
    /// session).
    Events {
        /// The session id.
        id: String,
    },
    /// Print the delegation tree of a session: every run, its provider, stop reason and times.
    Tree {
        /// The session id.
        id: String,
    },
    /// Remove a session with its runs and their children's sessions.
    Rm {
        /// The session id.
        id: String,
    },
    /// Remove every session not written for longer than DURATION (`7d`, `12h`, `30m`).
    Gc {
        /// How old a session must be to go.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: Duration,
    },
}

pub(crate) fn run(args: Args) -> Result<u8> {
    let open = args.store.open()?;
    let json = args.store.json;
    let store = open.store.as_ref();
    match args.command {
        SessionsCommand::List => list(store, json)?,
        SessionsCommand::Show { id } => {
            known(&open, &id)?;
            let events = store.events(&id)?;
            if json {
                let events: Vec<serde_json::Value> = events
                    .iter()
                    .map(|e| {
                        let body: serde_json::Value =
                            serde_json::from_str(&e.body).unwrap_or(serde_json::Value::Null);
                        serde_json::json!({"seq": e.seq, "at-ms": e.at_ms, "event": body})
                    })
                    .collect();
                outln!("{}", serde_json::Value::Array(events));
            } else {
                for e in &events {
                    outln!("{:>5} {} {} {}", e.seq, time(e.at_ms), e.kind, e.body);
                }
                let own = turn_usage(&events);
                let whole = tree_usage(store, &id)?;
                if let Some(whole) = whole {
                    let own = own.unwrap_or_default();
                    outln!(
                        "tokens: {} ({} in, {} out) in this session's turns; {} ({} in, {} out) with its children's",
                        own.total(),
                        own.prompt_tokens,
                        own.completion_tokens,
                        whole.total(),
                        whole.prompt_tokens,
                        whole.completion_tokens
                    );
                }
            }
        }
        SessionsCommand::Events { id } => {
            known(&open, &id)?;
            // Already one JSON object a line: `--json` changes nothing.
            for line in store.journal_of(&id)? {
                outln!("{line}");
            }
        }
        SessionsCommand::Tree { id } => {
            known(&open, &id)?;
            let tree = seam_host::session_store::tree::tree(store, &id)?;
            // What the whole tree spent, over every process that ran it, and its budget.
            let spend = store.spend(&id)?.unwrap_or_default();
            // The requests for approval made anywhere in the tree, kept with its top session.
            let approvals = store.approvals(Some(&id))?;
            if json {
                let mut json = serde_json::json!({
                    "session": id, "spent": spend.spent.report(), "runs": tree,
                    "approvals": approvals,
                });
                if let Some(budget) = spend.budget {
                    json["budget"] = serde_json::json!(budget);
                }
                outln!("{json}");
            } else {
                let summary = store.session(&id)?;
                let state = if summary.is_some_and(|s| s.interrupted) {
                    " (its last turn was interrupted)"
                } else {
                    ""
                };
                outln!("session {id}{state}{}", spent_words(&spend.spent.report()));
                if let Some(budget) = spend.budget {
                    outln!("  budget: {}", serde_json::json!(budget));
                }
                print_tree(&tree, 1);
                if !approvals.is_empty() {
                    outln!("  approvals:");
                    for a in &approvals {
                        outln!("    {}", a.listing());
                    }
                }
            }
        }
        SessionsCommand::Rm { id } => {
            if !store.remove(&id)? {
                bail!("no session `{id}` in {}", open.name);
            }
            outln!("removed session {id}");
        }
        SessionsCommand::Gc { older_than } => {
            let cutoff = now_ms().saturating_sub(older_than.as_millis() as u64);
            let gone = store.gc(cutoff)?;
            outln!("removed {gone} session(s)");
        }
    }
    Ok(EXIT_OK)
}

/// The tokens a session's turns used, summed from their `turn/end` events, if any said.
fn turn_usage(events: &[seam_host::session_store::StoredEvent]) -> Option<seam_host::Usage> {
    let mut total: Option<seam_host::Usage> = None;
    for e in events.iter().filter(|e| e.kind == "turn/end") {
        let used = serde_json::from_str::<serde_json::Value>(&e.body)
            .ok()
            .and_then(|body| {
                serde_json::from_value::<seam_host::Usage>(body["usage"].clone()).ok()
            });
        if let Some(used) = used {
            *total.get_or_insert_default() += used;
        }
    }
    total
}

/// The tokens of a session and of every child session below it (the runs' kept sessions),
/// each counted once however many activations ran it.
fn tree_usage(
    store: &dyn seam_host::session_store::SessionStore,
    id: &str,
) -> Result<Option<seam_host::Usage>> {
    let mut seen = std::collections::HashSet::from([id.to_string()]);
    let mut queue = vec![id.to_string()];
    let mut total: Option<seam_host::Usage> = None;
    while let Some(session) = queue.pop() {
        if let Some(used) = turn_usage(&store.events(&session)?) {
            *total.get_or_insert_default() += used;
        }
        for run in store.runs_of(&session)? {
            if let Some(child) = run.child_session {
                if seen.insert(child.clone()) {
                    queue.push(child);
                }
            }
        }
    }
    Ok(total)
}

fn known(open: &OpenStore, id: &str) -> Result<()> {
    if open.store.session(id)?.is_none() {
        bail!(
            "no session `{id}` in {} (`seam sessions list` shows them)",
            open.name
        );
    }
    Ok(())
}

fn list(store: &dyn SessionStore, json: bool) -> Result<()> {
    let sessions: Vec<_> = store
        .sessions()?
        .into_iter()
        .filter(|s| s.parent.is_none())
        .collect();
    if json {
        let rows: Vec<serde_json::Value> = sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id, "agent": s.agent, "working-directory": s.working_directory,
                    "created-ms": s.created_ms, "updated-ms": s.updated_ms,
                    "events": s.events, "bytes": s.bytes, "interrupted": s.interrupted,
                })
            })
            .collect();
        outln!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    for s in sessions {
        let state = if s.interrupted { "  interrupted" } else { "" };
        outln!(
            "{}  {}  {} events  {}{state}",
            s.id,
            time(s.updated_ms),
            s.events,
            s.working_directory
        );
    }
    Ok(())
}

/// `: N tokens (I in, O out), $C`, what a tree spent (as [`Spent::report`] gives it), or
/// nothing when it spent no tokens.
///
/// [`Spent::report`]: seam_host::spend::Spent::report
fn spent_words(report: &serde_json::Value) -> String {
    let input = report["input_tokens"].as_u64().unwrap_or(0);
    let output = report["output_tokens"].as_u64().unwrap_or(0);
    if input + output == 0 {
        return String::new();
    }
    let cost = match report["cost_usd"].as_f64() {
        Some(usd) if usd > 0.0 => format!(", ${usd:.4}"),
        _ => String::new(),
    };
    format!(
        ": {} tokens ({input} in, {output} out){cost}",
        input + output
    )
}

fn print_tree(runs: &[serde_json::Value], depth: usize) {
    for run in runs {
        let indent = "  ".repeat(depth);
        let field = |k: &str| run[k].as_str().unwrap_or("").to_string();
        let outcome = match run["stop-reason"].as_str() {
            Some(reason) => reason.to_string(),
            None => field("status"),
        };
        let took = match (run["started-ms"].as_u64(), run["ended-ms"].as_u64()) {
            (Some(a), Some(b)) => format!(" in {} ms", b.saturating_sub(a)),
            _ => String::new(),
        };
        let why = run["diagnostic"]
            .as_str()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        // What the child's session spent, over all its activations.
        let spent = spent_words(&run["spent"]).replacen(": ", ", ", 1);
        // What the delegation narrowed its subtree to, and who answers for it.
        let scope = if run["scope"].is_null() {
            String::new()
        } else {
            format!(", scope {}", run["scope"])
        };
        let approver = run["approver"]
            .as_str()
            .map(|a| format!(", approver {a}"))
            .unwrap_or_default();
        outln!(
            "{indent}{} on `{}`: {outcome}, started {}{took}{spent}{scope}{approver}{why}",
            field("run"),
            field("provider"),
            time(run["started-ms"].as_u64().unwrap_or(0)),
        );
        if let Some(children) = run["runs"].as_array() {
            print_tree(children, depth + 1);
        }
    }
}

/// A time, as RFC 3339 in UTC to the second.
fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}
