//! What `seam run --record` keeps of how a session ran, and the cassette it writes: read back
//! by `seam replay`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use seam_host::cassette::{Cassette, Entry, Kind, CASSETTE_VERSION, ROOT_KEY};
use seam_host::session::SessionEvent;
use seam_host::session_store::SessionStore;

/// What `seam run --record` and a session's recording keep of how it ran.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Meta {
    /// The config file, absolute.
    pub(crate) config: PathBuf,
    /// The model the command asked for, if it overrode the config's.
    pub(crate) model: Option<String>,
    /// The top-level agent's working directory.
    pub(crate) working_directory: String,
}

/// The prompts of the turns of the top-level session `session`: the first user message of
/// each turn (later ones are steering and notices, which the replay makes itself).
pub(crate) fn prompts_of(store: &dyn SessionStore, session: &str) -> Result<Vec<String>> {
    let mut prompts = Vec::new();
    let mut in_turn_start = false;
    for e in store.events(session)? {
        let Ok(event) = serde_json::from_str::<SessionEvent>(&e.body) else {
            continue;
        };
        match event {
            SessionEvent::TurnStart { .. } => in_turn_start = true,
            SessionEvent::UserMessage { content } if in_turn_start => {
                prompts.push(seam_host::blocks_text(&content));
                in_turn_start = false;
            }
            _ => {}
        }
    }
    Ok(prompts)
}

/// The cassette of the session `session` as `seam run` recorded it.
pub(crate) fn cassette(
    store: &dyn SessionStore,
    session: &str,
    config: &Path,
    gaps: Vec<String>,
) -> Result<Cassette> {
    let entries = store.tape(session)?;
    let meta = last_meta(&entries)?;
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("cannot read config `{}`", config.display()))?;
    // Its relative component paths resolve against its folder wherever the replay runs.
    let config = &std::path::absolute(config).unwrap_or_else(|_| config.to_path_buf());
    Ok(Cassette {
        version: CASSETTE_VERSION,
        config: text,
        config_dir: config
            .parent()
            .unwrap_or(Path::new("."))
            .display()
            .to_string(),
        model: meta.as_ref().and_then(|m| m.model.clone()),
        working_directory: meta
            .map(|m| m.working_directory)
            .unwrap_or_else(|| ".".into()),
        prompts: prompts_of(store, session)?,
        entries,
        gaps,
    })
}

pub(crate) fn last_meta(entries: &[Entry]) -> Result<Option<Meta>> {
    entries
        .iter()
        .rev()
        .find(|e| e.kind == Kind::Meta && e.key == ROOT_KEY)
        .map(|e| serde_json::from_value(e.body.clone()).context("an unreadable `meta` entry"))
        .transpose()
}
