//! `seam replay SESSION|FILE [--config CONFIG] [--store STORE] [--model M] [--until STEP]
//! [--json]`: runs a recorded session's tree again with the recorded model replies, the
//! components for real, and reports the first place it does something else. Also what `seam
//! run --record FILE` writes: a cassette, the recording with its config and prompts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use seam_host::cassette::{Cassette, Entry, Kind, CASSETTE_VERSION};
use seam_host::config::Config;
use seam_host::session_store::{MemoryStore, SessionStore, StoreLimits};
use seam_host::tape::Tape;
use seam_host::ContentBlock;
use tokio_util::sync::CancellationToken;

use super::cassette::{last_meta, prompts_of};
use super::{load_for_use, read_config, with_host_store, EXIT_OK, EXIT_UNSUCCESSFUL};

/// `seam replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session kept in the store (`seam sessions list`), or a cassette file written by
    /// `seam run --record FILE`.
    target: String,
    /// The config to replay with (default: the one the session was recorded with; a cassette
    /// carries its own).
    #[arg(long, value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// The store the session is in: `sqlite:PATH`, `memory`, or `nats` (default: `[sessions]
    /// store` of `--config`, else $XDG_STATE_HOME/seam/sessions.db).
    #[arg(long, value_name = "STORE")]
    store: Option<String>,
    /// The top-level agent's model string, overriding the recorded one.
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// Stop after this many model steps (counted over the whole tree, in the order they are
    /// replayed), reporting whether the replay matched up to there.
    #[arg(long, value_name = "STEP")]
    until: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// A recording, whichever way it came.
struct Recorded {
    config: Config,
    model: Option<String>,
    working_directory: String,
    prompts: Vec<String>,
    entries: Vec<Entry>,
    gaps: Vec<String>,
}

fn load(args: &Args) -> Result<Recorded> {
    let path = Path::new(&args.target);
    if path.is_file() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read `{}`", path.display()))?;
        let cassette: Cassette = serde_json::from_str(&text).with_context(|| {
            format!(
                "`{}` is not a cassette (`seam run --record FILE` writes one)",
                path.display()
            )
        })?;
        if cassette.version != CASSETTE_VERSION {
            bail!(
                "`{}` is a cassette of version {}; this seam reads version {CASSETTE_VERSION}",
                path.display(),
                cassette.version
            );
        }
        let config = match &args.config {
            Some(c) => read_config(c)?,
            None => {
                let dir = PathBuf::from(&cassette.config_dir);
                Config::parse(&cassette.config, &path.with_extension("toml"), &dir)
                    .with_context(|| format!("the config in cassette `{}`", path.display()))?
            }
        };
        return Ok(Recorded {
            config,
            model: args.model.clone().or(cassette.model),
            working_directory: cassette.working_directory,
            prompts: cassette.prompts,
            entries: cassette.entries,
            gaps: cassette.gaps,
        });
    }
    let open = super::sessions::open_named(args.store.as_deref(), args.config.as_deref())?;
    load_stored(
        open.store.as_ref(),
        &open.name,
        &args.target,
        args.config.as_deref(),
        args.model.clone(),
    )
}

/// The recording of the top-level session `session` of `store` (called `name` in messages),
/// with `config` (default: the one it was recorded with) and `model` (default: the recorded
/// one).
fn load_stored(
    store: &dyn SessionStore,
    name: &str,
    session: &str,
    config: Option<&Path>,
    model: Option<String>,
) -> Result<Recorded> {
    let Some(summary) = store.session(session)? else {
        bail!(
            "`{session}` is neither a cassette file nor a session in {name} (`seam sessions \
             list` shows them)"
        );
    };
    let entries = store.tape(session)?;
    if entries.is_empty() {
        bail!(
            "session `{session}` in {name} has no recording: it ran with `[recording] enabled = \
             false`, or before sessions were recorded"
        );
    }
    let meta = last_meta(&entries)?;
    let config = match (config, &meta) {
        (Some(c), _) => read_config(c)?,
        (None, Some(meta)) => read_config(&meta.config).with_context(|| {
            format!("the config session `{session}` was recorded with (give another with --config)")
        })?,
        (None, None) => bail!("session `{session}` does not say its config: give --config"),
    };
    Ok(Recorded {
        config,
        model: model.or_else(|| meta.as_ref().and_then(|m| m.model.clone())),
        working_directory: meta
            .map(|m| m.working_directory)
            .unwrap_or(summary.working_directory),
        prompts: prompts_of(store, session)?,
        entries,
        gaps: Vec::new(),
    })
}

/// Where a recording cut short by the end of its process stops.
#[derive(serde::Serialize)]
struct Cut {
    /// The top-level turn the process was killed in.
    turn: u32,
    /// The agent or run whose next input was never recorded.
    key: String,
    /// Its step that was never recorded.
    step: u64,
}

/// What a replay found.
#[derive(serde::Serialize)]
pub(crate) struct Report {
    identical: bool,
    /// Model steps replayed.
    steps: u64,
    /// Turns replayed, of the recorded ones.
    turns: usize,
    recorded_turns: usize,
    divergence: Option<seam_host::tape::Divergence>,
    /// Stopped at `--until` before the end.
    stopped: bool,
    /// Where the recording was cut short (its process killed mid-turn): the replay matched up
    /// to there, and went no further.
    cut: Option<Cut>,
    /// What the recording did not keep, which the replay could not check.
    gaps: Vec<String>,
}

/// Replays what `args` names; the report.
async fn replay(args: &Args, interrupt: CancellationToken) -> Result<Report> {
    replay_recorded(load(args)?, args.until, interrupt).await
}

/// Replays the top-level session `session` of `store` with `config` (for `seam ui`); the
/// report as `--json` prints it.
pub(crate) async fn replay_session(
    store: Arc<dyn SessionStore>,
    session: &str,
    config: &Path,
    until: Option<u64>,
) -> Result<serde_json::Value> {
    let name = store.name().to_string();
    let recorded = tokio::task::block_in_place(|| {
        load_stored(store.as_ref(), &name, session, Some(config), None)
    })?;
    let report = replay_recorded(recorded, until, CancellationToken::new()).await?;
    Ok(serde_json::to_value(report)?)
}

/// Replays `recorded` (stopping after `until` model steps if given); the report.
async fn replay_recorded(
    recorded: Recorded,
    until: Option<u64>,
    interrupt: CancellationToken,
) -> Result<Report> {
    // The replay writes to a store of its own: the recorded session is left as it was.
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new(StoreLimits::default()));
    let tape = Tape::player(recorded.entries.clone(), until);
    let report = with_host_store(store, |host| {
        let tape = tape.clone();
        let recorded = &recorded;
        let interrupt = interrupt.clone();
        async move {
            // Set before the load: a peer whose answers the recording keeps is not reached.
            host.subagents().recording().replay_next(tape.clone());
            let loaded = load_for_use(&host, &recorded.config, &interrupt).await?;
            // A replay of other plugins than the recorded ones says nothing about them.
            if !loaded.is_ok() {
                bail!(
                    "the config did not load, so the recording cannot be replayed:\n{}",
                    loaded.failures()
                );
            }
            let agent = host
                .create_agent_in(recorded.model.as_deref(), &recorded.working_directory, None)
                .context("cannot create the top-level agent")?;
            let mut turns = 0;
            for prompt in &recorded.prompts {
                if tape.divergence().is_some() || tape.stopped() || interrupt.is_cancelled() {
                    break;
                }
                agent
                    .run_turn(vec![ContentBlock::text(prompt.clone())])
                    .await;
                turns += 1;
                // As `seam run` did after each recorded turn.
                super::run::wait_for_background(&host, agent.id(), "", &interrupt, None).await;
            }
            host.agents().dispose(agent.id()).await;
            host.unload_all().await;
            Ok::<_, anyhow::Error>(turns)
        }
    })
    .await?;
    let turns = report;
    let mut divergence = tape.divergence();
    // Running out of inputs in a turn the recording never saw end is its cut, not a
    // divergence.
    let cut = match (&divergence, tape.cut_turn()) {
        (Some(d), Some(turn)) if d.recorded.is_null() => Some(Cut {
            turn,
            key: d.key.clone(),
            step: d.step,
        }),
        _ => None,
    };
    if cut.is_some() {
        divergence = None;
    }
    let stopped = tape.stopped();
    if divergence.is_none() && !stopped && cut.is_none() {
        // What the recording has and the replay never asked for is a divergence too.
        if let Some((key, kind, left)) = tape
            .unplayed()
            .into_iter()
            .find(|(_, kind, _)| *kind == Kind::Model)
        {
            divergence = Some(seam_host::tape::Divergence {
                key: key.clone(),
                kind,
                step: 0,
                what: format!(
                    "the recording has {left} more model repl{} at `{key}` that the replay \
                     never asked for",
                    if left == 1 { "y" } else { "ies" }
                ),
                recorded: serde_json::Value::String(format!("{left} more")),
                now: serde_json::Value::Null,
            });
        }
    }
    let steps = tape
        .entries()
        .iter()
        .filter(|e| e.kind == Kind::Model)
        .count() as u64;
    let played = steps
        - tape
            .unplayed()
            .iter()
            .filter(|(_, k, _)| *k == Kind::Model)
            .map(|(_, _, n)| n)
            .sum::<u64>();
    let mut gaps = recorded.gaps.clone();
    gaps.extend(
        tape.gaps()
            .into_iter()
            .filter(|g| !recorded.gaps.contains(g)),
    );
    let report = Report {
        identical: divergence.is_none(),
        steps: played,
        turns,
        recorded_turns: recorded.prompts.len(),
        divergence,
        stopped,
        cut,
        gaps,
    };
    Ok(report)
}

impl Report {
    /// The report in words: the divergence as a diff, or how far it matched; then the gaps.
    fn words(&self, until: Option<u64>) -> String {
        let mut out = match (&self.divergence, &self.cut) {
            (Some(d), _) => d.to_string(),
            (None, Some(cut)) => format!(
                "identical up to the cut: the recording ends in turn {} at `{}`, step {} (its \
                 process ended there, as a kill -9 leaves it); later turns were not replayed",
                cut.turn, cut.key, cut.step
            ),
            (None, None) if self.stopped => format!(
                "stopped at step {}: identical up to there",
                until.unwrap_or(0)
            ),
            (None, None) => format!(
                "identical: {} model steps over {} turn{}",
                self.steps,
                self.turns,
                if self.turns == 1 { "" } else { "s" }
            ),
        };
        for gap in &self.gaps {
            out.push_str(&format!("\nnot replayed: {gap}"));
        }
        out
    }
}

/// Replays the cassette `file` (for `seam test --replay`): whether it matched, and the report
/// in words.
pub(crate) async fn replay_cassette(
    file: &Path,
    interrupt: CancellationToken,
) -> Result<(bool, String)> {
    let args = Args {
        target: file.display().to_string(),
        config: None,
        store: None,
        model: None,
        until: None,
        json: false,
    };
    let report = replay(&args, interrupt).await?;
    Ok((report.identical, report.words(None)))
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let report = replay(&args, interrupt).await?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        outln!("{}", report.words(args.until));
    }
    Ok(if report.identical {
        EXIT_OK
    } else {
        EXIT_UNSUCCESSFUL
    })
}
