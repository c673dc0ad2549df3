//! The config file: a TOML list of plugin entries.
//!
//! ```toml
//! [[plugin]]
//! id = "mock-a"                       # unique; names the plugin in every message
//! component = "mock_provider.wasm"    # relative to the config file
//! disabled = false                    # optional
//! kind = "provider"                   # optional: refuse a component of the other world
//! config = { name = "mock-a" }        # optional; reaches the component as JSON
//! [plugin.grants]                     # optional; default: nothing granted
//! dirs = [{ host = "data", guest = "/data" }]
//! [plugin.limits]                     # optional; overrides the host's default limits
//! memory_mb = 32
//!
//! [[plugin]]                          # an agent program spoken to over ACP (no component)
//! id = "claude"
//! kind = "acp"
//! command = ["claude-code-acp"]       # argv; a bare name is looked up on PATH
//! config = { name = "claude", permissions = "reject" }
//! [plugin.grants]
//! env = ["ANTHROPIC_API_KEY"]         # the only variables the process sees
//!
//! [[plugin]]                          # a component from a registry, signed by a trusted key
//! id = "researcher"
//! component = "oci://ghcr.io/org/researcher:1.0"   # or `...@sha256:DIGEST`
//! verify = "alice"                    # a key of [trust.keys]; `false` loads it unsigned
//!
//! [trust.keys]
//! alice = "keys/alice.pub"
//!
//! [[plugin]]                          # an MCP server's tools (no component)
//! id = "notes"
//! kind = "mcp"
//! command = ["notes-mcp"]             # over stdio; or `url = "http://127.0.0.1:8000/mcp"`
//! config = { prefix = "notes", deny = ["delete"], timeout_ms = 30000 }
//! ```
//!
//! `[plugin.grants]` and `[plugin.limits]` are read by [`crate::sandbox::parse_grants`] and
//! [`crate::sandbox::parse_limits`]; `[oci]`, `[trust]` and `verify` by [`crate::oci::settings`].
//! [`Config::from_file`] also reads the config's lock file (`seam.lock` beside `seam.toml`).

use std::path::{Path, PathBuf};
#[cfg(feature = "oci")]
use std::sync::Arc;

use serde::Deserialize;

#[cfg(feature = "oci")]
use crate::oci::{Lock, LockError, OciRef, OciSettings, OciSource, Staleness, Trust};

use crate::entries::BackendEntry;
use crate::sandbox::EntryError;

use seam_agent::agent::AgentConfig;
use seam_agent::model::ModelsConfig;
use thiserror::Error;

/// A config problem, naming the file and, where it applies, the entry and key.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown top-level keys.
    #[error("config `{path}`: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        message: String,
    },
    /// One entry is wrong.
    #[error("config `{path}`: plugin entry {index} (id `{id}`): {message}")]
    Entry {
        /// The file.
        path: PathBuf,
        /// Position of the entry, from 1.
        index: usize,
        /// The entry's id, or `?` when it has none.
        id: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// The config's lock file cannot be read.
    #[cfg(feature = "oci")]
    #[error(transparent)]
    Lock(#[from] LockError),
}

/// One plugin entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginEntry {
    /// Unique id of this plugin instance.
    pub id: String,
    /// What the entry loads, by kind of entry.
    pub source: EntrySource,
    /// Plugin config, passed to the plugin as a JSON object.
    pub config: serde_json::Value,
    /// A disabled entry is listed but not loaded.
    pub disabled: bool,
    /// The plugin kind the entry expects: for a component, the `kind` written (`provider`,
    /// `tool` or `observer`; a component of another world is refused), or `None` to read it
    /// from the component; an ACP entry is a provider, an MCP entry a tool.
    pub kind: Option<seam_core::types::PluginKind>,
    /// `[plugin.grants]`: what the plugin may reach beyond Seam's imports (default: nothing).
    pub grants: crate::sandbox::Grants,
    /// `[plugin.limits]`: overrides of the host-wide resource limits.
    pub limits: crate::sandbox::LimitOverrides,
    /// `config.budget` of a tool entry: the cap on what each run its calls start may spend
    /// (taken out of `config`: the host's key, not the plugin's).
    pub budget: Option<seam_core::spend::Budget>,
    /// `config.scope` of a tool entry: what each run its calls start, and everything below it,
    /// may still reach (taken out of `config`, as `budget` is).
    pub scope: Option<seam_core::scope::Scope>,
    /// `config.approve` of a tool entry: which of its tools' calls need a yes first (taken out
    /// of `config`, as `budget` is).
    pub approve: Option<seam_core::approval::EntryPolicy>,
    /// `config.approver` of a tool entry: who answers the requests made below the runs its
    /// calls start (taken out of `config`, as `budget` is).
    pub approver: Option<seam_core::approval::Approver>,
    /// `config.record` of an entry: `false` keeps its components' clock, random and HTTP live
    /// in a recording and in a replay (taken out of `config`, as `budget` is).
    pub record: bool,
    /// `config.share_instance`: the most runs one instance of this provider serves at once
    /// (`true` is [`seam_wasm::DEFAULT_SHARED_RUNS`]); `None`, the default, is an instance per run.
    pub share_instance: Option<usize>,
}

/// The most runs `config.share_instance` may put on one instance.
pub const MAX_SHARED_RUNS: u64 = 10_000;

/// What an entry loads: a component (a file, or from a registry), or an entry of a kind that
/// is not a component, which its [`crate::entries::EntryBackend`] answers for. A kind this
/// build of `seam-host` left out (a cargo feature) is refused when the config is read, by name.
#[derive(Debug, Clone, PartialEq)]
pub enum EntrySource {
    /// `component = "PATH"`: a component file, made absolute against the config's folder.
    Component(PathBuf),
    /// `component = "oci://..."`: a component from a registry: the reference, the signature it
    /// must carry, its lock line and how registries are reached. What is compiled is the
    /// checked file in the OCI store.
    #[cfg(feature = "oci")]
    Oci(Box<OciSource>),
    /// `kind = "acp"`, `kind = "mcp"`, ...: an entry of a kind in [`crate::entries::KINDS`].
    Backend(BackendEntry),
}

/// The kind of an entry, as `seam check` names it: [`EntrySource`] without its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A component file.
    Component,
    /// A component from a registry.
    Oci,
    /// A kind of [`crate::entries::KINDS`], by its name (`acp`).
    Backend(&'static str),
}

impl EntryKind {
    /// The name `seam check` gives it (`component`, `oci`, `acp`).
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Component => "component",
            EntryKind::Oci => "oci",
            EntryKind::Backend(name) => name,
        }
    }

    /// The backend of a kind that is not a component.
    pub fn backend(self) -> Option<&'static dyn crate::entries::EntryBackend> {
        match self {
            EntryKind::Backend(name) => crate::entries::backend(name),
            EntryKind::Component | EntryKind::Oci => None,
        }
    }
}

impl serde::Serialize for EntryKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl EntrySource {
    /// The kind of entry.
    pub fn kind(&self) -> EntryKind {
        match self {
            EntrySource::Component(_) => EntryKind::Component,
            #[cfg(feature = "oci")]
            EntrySource::Oci(_) => EntryKind::Oci,
            EntrySource::Backend(entry) => EntryKind::Backend(entry.backend().name()),
        }
    }

    /// The local file whose change means the entry is to be reloaded (`seam dev` watches it): a
    /// component file, or a program named by its path; none for a registry's component, a
    /// program looked up on PATH or a URL.
    pub fn watched_file(&self) -> Option<PathBuf> {
        match self {
            EntrySource::Component(path) => Some(path.clone()),
            #[cfg(feature = "oci")]
            EntrySource::Oci(_) => None,
            EntrySource::Backend(entry) => entry.watched_file(),
        }
    }

    /// Why `seam compile` has nothing to compile for the entry, if it has not: what it is.
    pub fn not_compiled(&self) -> Option<&'static str> {
        match self {
            EntrySource::Component(_) => None,
            #[cfg(feature = "oci")]
            EntrySource::Oci(_) => Some("a component from a registry, compiled by `seam pull`"),
            EntrySource::Backend(entry) => Some(entry.not_compiled()),
        }
    }

    /// The program and its arguments, for an entry that reports them (an ACP agent's).
    pub fn command(&self) -> Option<&[String]> {
        match self {
            EntrySource::Backend(entry) => entry.command(),
            _ => None,
        }
    }

    /// What the entry names, as written (made absolute where it is a path): the component file
    /// or reference, the agent program, the MCP server's program or URL.
    pub fn written(&self) -> PathBuf {
        match self {
            EntrySource::Component(path) => path.clone(),
            #[cfg(feature = "oci")]
            EntrySource::Oci(source) => PathBuf::from(source.reference.to_string()),
            EntrySource::Backend(entry) => entry.written(),
        }
    }

    /// The local component file, for a `component = "PATH"` entry.
    pub fn component_file(&self) -> Option<&Path> {
        match self {
            EntrySource::Component(path) => Some(path),
            #[cfg(feature = "oci")]
            EntrySource::Oci(_) => None,
            EntrySource::Backend(_) => None,
        }
    }
}

impl PluginEntry {
    /// What the entry names, as written: see [`EntrySource::written`].
    pub fn component(&self) -> PathBuf {
        self.source.written()
    }
}

/// The keys of a plugin entry every kind shares; the kind's own keys are read by hand first.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: String,
    #[serde(default = "empty_object")]
    config: serde_json::Value,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    kind: Option<seam_core::types::PluginKind>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// A whole config: plugin entries in order, the agent defaults and the models.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// Where the config was read from, if a file.
    pub source: Option<PathBuf>,
    /// The entries, in file order.
    pub plugins: Vec<PluginEntry>,
    /// `[agent]`: the top-level agent of `seam run` and the defaults children inherit.
    pub agent: AgentConfig,
    /// `[models]`: scripts and the OpenAI-compatible endpoint.
    pub models: ModelsConfig,
    /// `[sessions]`: where sessions are kept, and their limits.
    pub sessions: SessionsConfig,
    /// `[approvals]`: how requests for approval are answered, and which uses of grants need one.
    pub approvals: seam_core::approvals::ApprovalSettings,
    /// `[recording]`: whether sessions record what their runs depended on, for `seam replay`.
    pub recording: seam_core::tape::RecordingSettings,
    /// `[cluster]`: the NATS cluster whose providers a front-end runs on (`seam worker` reads
    /// its connection here too).
    #[cfg(feature = "cluster")]
    pub cluster: Option<seam_cluster::ClusterConfig>,
    /// `[a2a]`: how `seam a2a` presents the top-level agent (its card's name, description,
    /// URL and skills) and where it may send push notifications.
    #[cfg(feature = "a2a")]
    pub a2a: Option<seam_a2a::server::A2aSettings>,
    /// `[oci]`: how registries are reached.
    #[cfg(feature = "oci")]
    pub oci: Arc<OciSettings>,
    /// `[trust]`: the keys a pulled component may be signed by.
    #[cfg(feature = "oci")]
    pub trust: Trust,
    /// The lock file read beside the config (`seam.lock`), if there is one.
    #[cfg(feature = "oci")]
    pub lock: Option<Lock>,
}

/// Where sessions are kept (`[sessions] store`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// `"memory"`: nothing outlives the process.
    Memory,
    /// `"sqlite:PATH"`: one SQLite file (a relative path is the config's folder's).
    Sqlite(PathBuf),
    /// `"nats"`: the JetStream of the config's `[cluster]`, shared by every front-end on it.
    Nats,
}

impl StoreSpec {
    /// Parses `memory`, `nats` or `sqlite:PATH`, a relative path resolved against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Self, BadStore> {
        match text.split_once(':') {
            _ if text == "memory" => Ok(Self::Memory),
            _ if text == "nats" => Ok(Self::Nats),
            Some(("sqlite", path)) if !path.is_empty() => Ok(Self::Sqlite(base.join(path))),
            _ => Err(BadStore(text.to_string())),
        }
    }
}

/// A `store` that is none of `memory`, `sqlite:PATH` and `nats`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{0}` is not a store: write \"memory\", \"sqlite:PATH\" or \"nats\"")]
pub struct BadStore(pub String);

/// `[sessions]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsConfig {
    /// `store`; absent, the embedder's default (the CLI's SQLite file in the state folder).
    pub store: Option<StoreSpec>,
    /// `max_session_mb`: most megabytes of events one session may hold.
    pub max_session_mb: u64,
    /// `retain_days`: sessions not written for this many days are removed when the store is
    /// opened; 0 keeps them.
    pub retain_days: u64,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            store: None,
            max_session_mb: seam_core::store::DEFAULT_MAX_SESSION_MB,
            retain_days: DEFAULT_RETAIN_DAYS,
        }
    }
}

/// Default of `[sessions] retain_days`.
pub const DEFAULT_RETAIN_DAYS: u64 = 30;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSessions {
    store: Option<String>,
    max_session_mb: Option<u64>,
    retain_days: Option<u64>,
}

fn sessions_config(raw: RawSessions, base: &Path) -> Result<SessionsConfig, EntryError> {
    let mut out = SessionsConfig::default();
    if let Some(store) = raw.store {
        out.store = Some(
            StoreSpec::parse(&store, base)
                .map_err(|e| EntryError::new("store", format!("key `store`: {e}")))?,
        );
    }
    if let Some(mb) = raw.max_session_mb {
        if mb == 0 {
            return Err(EntryError::new(
                "max_session_mb",
                "key `max_session_mb` must be at least 1 (megabytes)".into(),
            ));
        }
        out.max_session_mb = mb;
    }
    if let Some(days) = raw.retain_days {
        out.retain_days = days;
    }
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    plugin: Vec<toml::Value>,
    #[serde(default)]
    agent: Option<toml::Value>,
    #[serde(default)]
    models: Option<toml::Value>,
    #[serde(default)]
    sessions: Option<toml::Value>,
    #[serde(default)]
    approvals: Option<toml::Value>,
    #[serde(default)]
    recording: Option<toml::Value>,
    #[serde(default)]
    cluster: Option<toml::Value>,
    #[serde(default)]
    oci: Option<toml::Value>,
    #[serde(default)]
    trust: Option<toml::Value>,
    #[serde(default)]
    a2a: Option<toml::Value>,
}

impl Config {
    /// Reads and validates a config file; component paths are resolved against its folder. Its
    /// lock file, if there is one, is read too, and each `oci://` entry gets its lock line.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let config = Self::parse(&text, path, base)?;
        #[cfg(feature = "oci")]
        let config = config.with_lock(Lock::read(&crate::oci::lock_path(path))?);
        Ok(config)
    }

    /// The config with `lock` as its lock: each `oci://` entry gets the line locking its id.
    /// A load then pulls exactly the locked digest, and refuses a reference that names another
    /// (even after the config was edited: `seam lock` accepts the edit).
    #[cfg(feature = "oci")]
    pub fn with_lock(mut self, lock: Option<Lock>) -> Self {
        for entry in &mut self.plugins {
            if let EntrySource::Oci(source) = &mut entry.source {
                source.locked = lock.as_ref().and_then(|l| l.entry(&entry.id)).cloned();
            }
        }
        self.lock = lock;
        self
    }

    /// The enabled `oci://` entries.
    #[cfg(feature = "oci")]
    pub fn oci_entries(&self) -> impl Iterator<Item = (&PluginEntry, &OciSource)> {
        self.plugins
            .iter()
            .filter(|e| !e.disabled)
            .filter_map(|e| match &e.source {
                EntrySource::Oci(source) => Some((e, &**source)),
                _ => None,
            })
    }

    /// How the config and its lock disagree, without asking a registry: entries without a lock
    /// line, lines for another reference or digest, lines for no entry. Empty for a config with
    /// no `oci://` entry and no lock.
    #[cfg(feature = "oci")]
    pub fn staleness(&self) -> Vec<Staleness> {
        let mut found = Vec::new();
        let lock = self.lock.as_ref();
        for (entry, source) in self.oci_entries() {
            let reference = source.reference.to_string();
            match lock.and_then(|l| l.entry(&entry.id)) {
                None => found.push(Staleness::Missing {
                    id: entry.id.clone(),
                    reference,
                }),
                Some(locked) if locked.reference != reference => {
                    found.push(Staleness::OtherReference {
                        id: entry.id.clone(),
                        reference,
                        locked: locked.clone(),
                    })
                }
                Some(locked) => {
                    if let Some(digest) = source.reference.digest().filter(|d| *d != locked.digest)
                    {
                        found.push(Staleness::OtherDigest {
                            id: entry.id.clone(),
                            digest,
                            locked: locked.clone(),
                        });
                    }
                }
            }
        }
        for locked in lock.map(|l| l.entries.as_slice()).unwrap_or_default() {
            if !self.oci_entries().any(|(e, _)| e.id == locked.id) {
                found.push(Staleness::Unused {
                    locked: locked.clone(),
                });
            }
        }
        found
    }

    /// Parses config text; `name` labels errors, `base` resolves relative component paths.
    pub fn parse(text: &str, name: &Path, base: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: name.to_path_buf(),
            message: e.message().to_string() + &line_of(text, e.span()),
        })?;
        let section = |key: &str, e: toml::de::Error| ConfigError::Parse {
            path: name.to_path_buf(),
            message: format!("[{key}]: {}", e.message()),
        };
        #[cfg(not(all(feature = "oci", feature = "cluster", feature = "a2a")))]
        let without = |key: &str, feature: &str| ConfigError::Parse {
            path: name.to_path_buf(),
            message: format!("[{key}]: {}", without_feature(feature)),
        };
        #[cfg(not(feature = "oci"))]
        if raw.oci.is_some() || raw.trust.is_some() {
            return Err(without(
                if raw.oci.is_some() { "oci" } else { "trust" },
                "oci",
            ));
        }
        #[cfg(feature = "oci")]
        let oci_section = |key: &str, e: EntryError| ConfigError::Parse {
            path: name.to_path_buf(),
            message: format!("[{key}]: {e}"),
        };
        #[cfg(feature = "oci")]
        let oci = Arc::new(match raw.oci {
            Some(v) => {
                crate::oci::settings::parse_oci(v, base).map_err(|e| oci_section("oci", e))?
            }
            None => OciSettings::default(),
        });
        #[cfg(feature = "oci")]
        let trust = match raw.trust {
            Some(v) => {
                crate::oci::settings::parse_trust(v, base).map_err(|e| oci_section("trust", e))?
            }
            None => Trust::default(),
        };
        #[cfg(feature = "oci")]
        let registries = OciContext {
            trust: &trust,
            settings: &oci,
        };
        #[cfg(not(feature = "oci"))]
        let registries = OciContext;
        let mut plugins: Vec<PluginEntry> = Vec::with_capacity(raw.plugin.len());
        for (i, value) in raw.plugin.into_iter().enumerate() {
            let id = value
                .get("id")
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_string();
            let entry_err = |message: String| ConfigError::Entry {
                path: name.to_path_buf(),
                index: i + 1,
                id: id.clone(),
                message,
            };
            // The sandbox tables are read by hand, so that errors name the nested key.
            let mut value = value;
            let sandbox = value
                .as_table_mut()
                .map(|t| (t.remove("grants"), t.remove("limits")));
            let Some(table) = value.as_table_mut() else {
                return Err(entry_err("a plugin entry must be a table".into()));
            };
            let source = entry_source(table, base, &registries).map_err(entry_err)?;
            let raw: RawEntry = value
                .try_into()
                .map_err(|e: toml::de::Error| entry_err(e.message().to_string()))?;
            // Missing only once the other keys are known: a misspelt `component` is named as
            // the unknown key it is.
            let source = source.ok_or_else(|| entry_err("missing field `component`".into()))?;
            let kind = match &source {
                EntrySource::Component(_) => raw.kind,
                #[cfg(feature = "oci")]
                EntrySource::Oci(_) => raw.kind,
                EntrySource::Backend(entry) => Some(entry.backend().plugin_kind()),
            };
            let mut entry = PluginEntry {
                id: raw.id,
                source,
                config: raw.config,
                disabled: raw.disabled,
                kind,
                grants: Default::default(),
                limits: Default::default(),
                budget: None,
                scope: None,
                approve: None,
                approver: None,
                record: true,
                share_instance: None,
            };
            if let Some((grants, limits)) = sandbox {
                if let Some(grants) = grants {
                    entry.grants = crate::sandbox::parse_grants(&grants, base)
                        .map_err(|e| entry_err(e.to_string()))?;
                }
                if let Some(limits) = limits {
                    entry.limits = crate::sandbox::parse_limits(&limits)
                        .map_err(|e| entry_err(e.to_string()))?;
                }
            }
            validate_id(&entry.id).map_err(|e| entry_err(e.to_string()))?;
            if plugins.iter().any(|p| p.id == entry.id) {
                return Err(entry_err(format!("key `id`: `{}` is used twice", entry.id)));
            }
            if !entry.config.is_object() {
                return Err(entry_err("key `config` must be a table".into()));
            }
            // The host's key, not the plugin's: taken out of what the component is given.
            entry.budget = seam_core::spend::Budget::of_entry_config(&entry.config)
                .map_err(|e| entry_err(e.to_string()))?;
            entry.scope = seam_core::scope::Scope::of_entry_config(&entry.config)
                .map_err(|e| entry_err(e.to_string()))?;
            entry.approve = seam_core::approval::EntryPolicy::of_entry_config(&entry.config)
                .map_err(|e| entry_err(e.to_string()))?;
            entry.approver = seam_core::approval::Approver::of_entry_config(&entry.config)
                .map_err(|e| entry_err(e.to_string()))?;
            entry.record = match entry.config.get("record") {
                None => true,
                Some(serde_json::Value::Bool(on)) => *on,
                Some(_) => {
                    return Err(entry_err(
                        "key `config.record` must be true or false".to_string(),
                    ))
                }
            };
            entry.share_instance = match entry.config.get("share_instance") {
                None | Some(serde_json::Value::Bool(false)) => None,
                Some(serde_json::Value::Bool(true)) => Some(seam_wasm::DEFAULT_SHARED_RUNS),
                Some(serde_json::Value::Number(n))
                    if n.as_u64()
                        .is_some_and(|n| (1..=MAX_SHARED_RUNS).contains(&n)) =>
                {
                    n.as_u64().map(|n| n as usize)
                }
                Some(_) => {
                    return Err(entry_err(format!(
                        "key `config.share_instance` must be true, false or the most runs one \
                         instance serves at once (1 to {MAX_SHARED_RUNS})"
                    )))
                }
            };
            if let (Some(_), Some(what)) = (entry.share_instance, entry.source.not_compiled()) {
                return Err(entry_err(format!(
                    "key `config.share_instance`: this entry is {what}; an instance is shared \
                     by the runs of a provider component"
                )));
            }
            if let Some(config) = entry.config.as_object_mut() {
                config.remove("record");
                config.remove("share_instance");
                config.remove("budget");
                config.remove("scope");
                config.remove("approve");
                config.remove("approver");
            }
            if let (Some(_), Some(what)) = (entry.approver, entry.source.not_compiled()) {
                return Err(entry_err(format!(
                    "key `config.approver`: this entry is {what}; an approver answers for the \
                     runs a tool component's calls start"
                )));
            }
            if let (Some(_), Some(what)) = (&entry.scope, entry.source.not_compiled()) {
                return Err(entry_err(format!(
                    "key `config.scope`: this entry is {what}; a scope narrows the runs a tool \
                     component's calls start"
                )));
            }
            if let (Some(_), Some(what)) = (entry.budget, entry.source.not_compiled()) {
                return Err(entry_err(format!(
                    "key `config.budget`: this entry is {what}; a budget caps the runs a tool \
                     component's calls start"
                )));
            }
            plugins.push(entry);
        }
        let agent = match raw.agent {
            Some(v) => v.try_into().map_err(|e| section("agent", e))?,
            None => AgentConfig::default(),
        };
        let models = match raw.models {
            Some(v) => v.try_into().map_err(|e| section("models", e))?,
            None => ModelsConfig::default(),
        };
        budgets(&agent, &models, &plugins).map_err(|message| ConfigError::Parse {
            path: name.to_path_buf(),
            message,
        })?;
        if models.openai.as_ref().is_some_and(|o| o.timeout_ms == 0) {
            return Err(ConfigError::Parse {
                path: name.to_path_buf(),
                message: "[models.openai]: key `timeout_ms` must be at least 1 (milliseconds)"
                    .into(),
            });
        }
        let sessions = match raw.sessions {
            Some(v) => {
                let raw: RawSessions = v.try_into().map_err(|e| section("sessions", e))?;
                sessions_config(raw, base).map_err(|message| ConfigError::Parse {
                    path: name.to_path_buf(),
                    message: format!("[sessions]: {message}"),
                })?
            }
            None => SessionsConfig::default(),
        };
        let approvals: seam_core::approvals::ApprovalSettings = match raw.approvals {
            Some(v) => v.try_into().map_err(|e| section("approvals", e))?,
            None => Default::default(),
        };
        let recording: seam_core::tape::RecordingSettings = match raw.recording {
            Some(v) => v.try_into().map_err(|e| section("recording", e))?,
            None => Default::default(),
        };
        if recording.max_mb == 0 {
            return Err(ConfigError::Parse {
                path: name.to_path_buf(),
                message: "[recording]: key `max_mb` must be at least 1 (MiB); to record \
                          nothing, set `enabled = false`"
                    .into(),
            });
        }
        if approvals.timeout_secs == 0 {
            return Err(ConfigError::Parse {
                path: name.to_path_buf(),
                message: "[approvals]: key `timeout_secs` must be at least 1 (seconds)".into(),
            });
        }
        #[cfg(not(feature = "a2a"))]
        if raw.a2a.is_some() {
            return Err(without("a2a", "a2a"));
        }
        #[cfg(feature = "a2a")]
        let a2a = match raw.a2a {
            Some(v) => {
                let settings: seam_a2a::server::A2aSettings =
                    v.try_into().map_err(|e| section("a2a", e))?;
                settings.validate().map_err(|e| ConfigError::Parse {
                    path: name.to_path_buf(),
                    message: format!("[a2a]: {e}"),
                })?;
                Some(settings)
            }
            None => None,
        };
        #[cfg(not(feature = "cluster"))]
        if raw.cluster.is_some() {
            return Err(without("cluster", "cluster"));
        }
        #[cfg(feature = "cluster")]
        let cluster = match raw.cluster {
            Some(v) => {
                let cluster: seam_cluster::ClusterConfig =
                    v.try_into().map_err(|e| section("cluster", e))?;
                cluster.validate().map_err(|e| ConfigError::Parse {
                    path: name.to_path_buf(),
                    message: match e {
                        seam_cluster::ClusterError::BadName { .. } => {
                            format!("[cluster] key `name`: {e}")
                        }
                        e => e.to_string(),
                    },
                })?;
                Some(cluster)
            }
            None => None,
        };
        #[cfg(not(feature = "cluster"))]
        if sessions.store == Some(StoreSpec::Nats) {
            return Err(ConfigError::Parse {
                path: name.to_path_buf(),
                message: format!(
                    "[sessions] key `store`: \"nats\" keeps sessions in a cluster's JetStream: {}",
                    without_feature("cluster")
                ),
            });
        }
        #[cfg(feature = "cluster")]
        if sessions.store == Some(StoreSpec::Nats) && cluster.is_none() {
            return Err(ConfigError::Parse {
                path: name.to_path_buf(),
                message: "[sessions] key `store`: \"nats\" keeps sessions in the JetStream of \
                          the config's [cluster], and this config has no [cluster] table"
                    .into(),
            });
        }
        Ok(Self {
            source: Some(name.to_path_buf()),
            plugins,
            agent,
            models,
            sessions,
            approvals,
            recording,
            #[cfg(feature = "a2a")]
            a2a,
            #[cfg(feature = "cluster")]
            cluster,
            #[cfg(feature = "oci")]
            oci,
            #[cfg(feature = "oci")]
            trust,
            #[cfg(feature = "oci")]
            lock: None,
        })
    }
}

/// Takes the keys of an entry's own kind out of its table (`kind = "acp"` or `"mcp"` and their
/// `command` or `url`, or `component` and `verify`), and says what the entry loads: `None` for
/// an entry of no other kind that lacks `component`. The error names the key.
fn entry_source(
    table: &mut toml::Table,
    base: &Path,
    registries: &OciContext,
) -> Result<Option<EntrySource>, String> {
    let kind = table
        .get("kind")
        .and_then(|k| k.as_str())
        .map(str::to_string);
    let not_for = |key: &str, what: &str| {
        table
            .contains_key(key)
            .then(|| format!("key `{key}` is only for {what}"))
    };
    if let Some(row) = kind.as_deref().and_then(crate::entries::row) {
        let Some(backend) = row.backend else {
            return Err(without_feature(row.feature));
        };
        if let Some(e) = crate::entries::foreign_key(table, Some(row.name)) {
            return Err(e);
        }
        if let Some(e) = not_for("verify", "components from a registry") {
            return Err(e);
        }
        return backend
            .read(table, base)
            .map(|entry| Some(EntrySource::Backend(entry)))
            .map_err(|e| e.to_string());
    }
    if let Some(e) = crate::entries::foreign_key(table, None) {
        return Err(e);
    }
    let verify = table.remove("verify");
    let written = match table.remove("component") {
        None => return Ok(None),
        Some(toml::Value::String(written)) => written,
        Some(_) => return Err("key `component` must be a string".into()),
    };
    if written.is_empty() {
        return Err("key `component` is empty".into());
    }
    if written.starts_with(OCI_SCHEME) {
        #[cfg(feature = "oci")]
        {
            let reference = OciRef::parse(&written).map_err(|e| format!("key `component`: {e}"))?;
            let verify =
                crate::oci::settings::entry_verify(verify.as_ref(), registries.trust, &reference)
                    .map_err(|e| e.to_string())?;
            return Ok(Some(EntrySource::Oci(Box::new(OciSource {
                reference,
                verify,
                locked: None,
                settings: registries.settings.clone(),
            }))));
        }
        #[cfg(not(feature = "oci"))]
        {
            let _ = (registries, verify);
            return Err(without_feature("oci"));
        }
    }
    if verify.is_some() {
        return Err(
            "key `verify` is only for components from a registry (`component = \
             \"oci://...\"`)"
                .into(),
        );
    }
    Ok(Some(EntrySource::Component(base.join(written))))
}

/// What an `oci://` entry is read with: the config's `[trust]` and `[oci]`.
#[cfg(feature = "oci")]
struct OciContext<'a> {
    trust: &'a Trust,
    settings: &'a Arc<OciSettings>,
}

/// Without registries, an `oci://` entry is refused.
#[cfg(not(feature = "oci"))]
struct OciContext;

/// The scheme of a component from a registry.
const OCI_SCHEME: &str = "oci://";

/// Why an entry of a kind this build left out is refused.
fn without_feature(feature: &str) -> String {
    format!(
        "this build of Seam has no `{feature}` feature (seam-host was built without it, \
         `default-features = false`); build it with the feature to use this"
    )
}

/// Checks the budgets and prices: every value in range, and, when any budget bounds cost, a
/// price for every model a run could call (a call that cannot be priced cannot be charged).
fn budgets(
    agent: &AgentConfig,
    models: &ModelsConfig,
    plugins: &[PluginEntry],
) -> Result<(), String> {
    if let Some(budget) = &agent.budget {
        budget
            .validate("agent.budget")
            .map_err(|e| format!("[agent.budget]: {e}"))?;
    }
    models.validate().map_err(|e| format!("[models]: {e}"))?;
    let mut costed = agent
        .budget
        .is_some_and(|b| b.cost_usd.is_some())
        .then(|| "[agent.budget]".to_string());
    for entry in plugins {
        if costed.is_none() && entry.budget.is_some_and(|b| b.cost_usd.is_some()) {
            costed = Some(format!("plugin `{}` config.budget", entry.id));
        }
    }
    let unpriced = models.unpriced();
    match costed {
        Some(at) if !unpriced.is_empty() => Err(format!(
            "{at} bounds cost_usd, so every model needs prices; these have none: {} (add              `prices = {{ input_per_mtok = .., output_per_mtok = .. }}` to each)",
            unpriced
                .iter()
                .map(|k| format!("[{k}]"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => Ok(()),
    }
}

fn validate_id(id: &str) -> Result<(), EntryError> {
    if id.is_empty() || id.len() > 64 {
        return Err(EntryError::new(
            "id",
            "key `id` must be 1 to 64 characters".into(),
        ));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(EntryError::new(
            "id",
            format!("key `id`: `{id}` may only contain ASCII letters, digits, `-`, `_` and `.`"),
        ));
    }
    Ok(())
}

fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(span) => {
            let start = span.start.min(text.len());
            let line = text.as_bytes()[..start]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "conf/seam.toml";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new(FILE), Path::new("/base"))
    }

    /// The error for `text`, which must be one naming an entry: (index, id, message).
    fn entry_error(text: &str) -> (usize, String, String) {
        match parse(text) {
            Err(ConfigError::Entry {
                path,
                index,
                id,
                message,
            }) => {
                assert_eq!(path, Path::new(FILE));
                (index, id, message)
            }
            other => panic!("{text:?}: expected an entry error, got {other:?}"),
        }
    }

    /// A host built without a feature refuses, naming it, what needs it: an entry of its kind,
    /// its config table. (`make test` runs these with `--no-default-features`.)
    #[test]
    #[cfg(not(all(feature = "acp", feature = "mcp", feature = "oci", feature = "cluster")))]
    fn what_needs_a_left_out_feature_is_refused_naming_it() {
        let cases: &[(&str, &str, bool)] = &[
            (
                "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = [\"agent\"]\n",
                "acp",
                cfg!(feature = "acp"),
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"mcp\"\ncommand = [\"server\"]\n",
                "mcp",
                cfg!(feature = "mcp"),
            ),
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"oci://127.0.0.1:5000/a:1\"\nverify = false\n",
                "oci",
                cfg!(feature = "oci"),
            ),
            ("[oci]\n", "oci", cfg!(feature = "oci")),
            (
                "[cluster]\nnats = \"nats://127.0.0.1:4222\"\n",
                "cluster",
                cfg!(feature = "cluster"),
            ),
            ("[sessions]\nstore = \"nats\"\n", "cluster", cfg!(feature = "cluster")),
        ];
        for (text, feature, built) in cases {
            if *built {
                continue;
            }
            let message = match parse(text) {
                Err(e) => e.to_string(),
                Ok(c) => panic!("{text:?} loaded without `{feature}`: {c:?}"),
            };
            assert!(
                message.contains(&format!("no `{feature}` feature")),
                "{text:?}: {message}"
            );
        }
    }

    #[test]
    fn entries_parse_in_order_with_defaults_and_resolved_paths() {
        let config = parse(
            "[[plugin]]\nid = \"a\"\ncomponent = \"plugins/a.wasm\"\n\n\
             [[plugin]]\nid = \"b.2_x-y\"\ncomponent = \"/abs/b.wasm\"\ndisabled = true\n\
             kind = \"tool\"\nconfig = { provider = \"a\", nested = { n = 1 } }\n",
        )
        .unwrap();
        assert_eq!(config.source.as_deref(), Some(Path::new(FILE)));
        let [a, b] = &config.plugins[..] else {
            panic!("{:?}", config.plugins)
        };
        assert_eq!(a.id, "a");
        assert_eq!(
            a.source,
            EntrySource::Component("/base/plugins/a.wasm".into())
        );
        assert_eq!(a.config, serde_json::json!({}));
        assert!(!a.disabled);
        assert_eq!(a.kind, None);
        assert_eq!(b.id, "b.2_x-y");
        assert_eq!(b.source, EntrySource::Component("/abs/b.wasm".into()));
        assert!(b.disabled);
        assert_eq!(b.kind, Some(seam_core::types::PluginKind::Tool));
        assert_eq!(
            b.config,
            serde_json::json!({"provider": "a", "nested": {"n": 1}})
        );
        assert_eq!(config.agent, AgentConfig::default());
        assert_eq!(config.models, ModelsConfig::default());
        assert!(parse("").unwrap().plugins.is_empty());
    }

    #[test]
    #[cfg(feature = "cluster")]
    fn a_nats_session_store_needs_a_cluster_and_names_the_key() {
        let err = parse("[sessions]\nstore = \"nats\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(FILE) && err.contains("key `store`") && err.contains("[cluster]"),
            "{err}"
        );
        let config =
            parse("[sessions]\nstore = \"nats\"\n\n[cluster]\nnats = \"nats://127.0.0.1:4222\"\n")
                .unwrap();
        assert_eq!(config.sessions.store, Some(StoreSpec::Nats));
        let err = parse("[sessions]\nstore = \"jetstream\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"nats\""), "the choices are named: {err}");
    }

    #[test]
    fn unknown_keys_name_the_file_the_entry_and_the_key() {
        let (index, id, message) =
            entry_error("[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\ncompnent = \"x\"\n");
        assert_eq!((index, id.as_str()), (1, "a"));
        assert!(message.contains("unknown field `compnent`"), "{message}");
        // The second entry is the one named.
        let (index, id, message) = entry_error(
            "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\n\n\
             [[plugin]]\nid = \"b\"\ncomponent = \"b.wasm\"\ncolour = \"red\"\n",
        );
        assert_eq!((index, id.as_str()), (2, "b"));
        assert!(message.contains("unknown field `colour`"), "{message}");
        // Nested sandbox tables name the nested key.
        let (_, _, message) = entry_error(
            "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\n[plugin.limits]\nmemroy_mb = 3\n",
        );
        assert!(
            message.starts_with("key `limits.memroy_mb` is unknown"),
            "{message}"
        );
        let (_, _, message) = entry_error(
            "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\n[plugin.grants]\nnet = []\n",
        );
        assert!(
            message.starts_with("key `grants.net` is unknown"),
            "{message}"
        );
        // Unknown top-level keys and sections are errors about the file.
        for text in [
            "[[plugins]]\nid = \"a\"\n",
            "verbose = true\n",
            "[agent]\nmodle = \"x\"\n",
            "[models]\nscript = {}\n",
        ] {
            match parse(text) {
                Err(e @ ConfigError::Parse { .. }) => {
                    let shown = e.to_string();
                    assert!(shown.starts_with(&format!("config `{FILE}`: ")), "{shown}");
                    let key = ["plugins", "verbose", "modle", "script"]
                        .into_iter()
                        .find(|k| text.contains(k))
                        .unwrap();
                    assert!(shown.contains(key), "{text:?}: {shown}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        // A section's error says which section.
        let shown = parse("[agent]\nmodle = \"x\"\n").unwrap_err().to_string();
        assert!(shown.contains("[agent]"), "{shown}");
        let zero = "[models.openai]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\ntimeout_ms = 0\n";
        let shown = parse(zero).unwrap_err().to_string();
        assert!(
            shown.contains("[models.openai]") && shown.contains("`timeout_ms` must be at least 1"),
            "{shown}"
        );
    }

    #[test]
    fn ids_must_be_unique_and_plain() {
        let (index, id, message) = entry_error(
            "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\n\n\
             [[plugin]]\nid = \"b\"\ncomponent = \"b.wasm\"\n\n\
             [[plugin]]\nid = \"a\"\ncomponent = \"c.wasm\"\n",
        );
        assert_eq!((index, id.as_str()), (3, "a"));
        assert_eq!(message, "key `id`: `a` is used twice");

        for bad in ["bad id!", "a/b", "ä", "a:b", "tab\there"] {
            let (index, id, message) = entry_error(&format!(
                "[[plugin]]\nid = {}\ncomponent = \"a.wasm\"\n",
                toml::Value::String(bad.into())
            ));
            assert_eq!((index, id.as_str()), (1, bad));
            assert_eq!(
                message,
                format!(
                    "key `id`: `{bad}` may only contain ASCII letters, digits, `-`, `_` and `.`"
                )
            );
        }
        let long = "x".repeat(65);
        for bad in ["", long.as_str()] {
            let (_, _, message) = entry_error(&format!(
                "[[plugin]]\nid = \"{bad}\"\ncomponent = \"a.wasm\"\n"
            ));
            assert_eq!(message, "key `id` must be 1 to 64 characters", "{bad:?}");
        }
        assert!(parse(&format!(
            "[[plugin]]\nid = \"{}\"\ncomponent = \"a.wasm\"\n",
            "x".repeat(64)
        ))
        .is_ok());
        // An entry without an id is named by its position, with `?`.
        let (index, id, message) = entry_error("[[plugin]]\ncomponent = \"a.wasm\"\n");
        assert_eq!((index, id.as_str()), (1, "?"));
        assert!(message.contains("missing field `id`"), "{message}");
    }

    #[test]
    fn config_must_be_a_table_and_component_must_not_be_empty() {
        for value in ["3", "\"x\"", "[1, 2]", "true"] {
            let (index, id, message) = entry_error(&format!(
                "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\nconfig = {value}\n"
            ));
            assert_eq!((index, id.as_str()), (1, "a"), "{value}");
            assert_eq!(message, "key `config` must be a table", "{value}");
        }
        let (index, id, message) = entry_error("[[plugin]]\nid = \"a\"\ncomponent = \"\"\n");
        assert_eq!((index, id.as_str()), (1, "a"));
        assert_eq!(message, "key `component` is empty");
        let (_, _, message) = entry_error("[[plugin]]\nid = \"a\"\n");
        assert!(message.contains("missing field `component`"), "{message}");
    }

    #[test]
    #[cfg(feature = "mcp")]
    fn mcp_entries_name_a_command_or_a_url() {
        let config = parse(
            "[[plugin]]\nid = \"notes\"\nkind = \"mcp\"\ncommand = [\"bin/notes\", \"-v\"]\n\n\
             [[plugin]]\nid = \"web\"\nkind = \"mcp\"\nurl = \"http://127.0.0.1:8000/mcp\"\n",
        )
        .unwrap();
        let [notes, web] = &config.plugins[..] else {
            panic!("{:?}", config.plugins)
        };
        assert_eq!(notes.kind, Some(seam_core::types::PluginKind::Tool));
        assert_eq!(notes.source.kind(), EntryKind::Backend("mcp"));
        assert_eq!(notes.component(), Path::new("/base/bin/notes"));
        assert_eq!(
            notes.source.watched_file().as_deref(),
            Some(Path::new("/base/bin/notes"))
        );
        assert_eq!(notes.source.command(), None);
        assert_eq!(web.source.watched_file(), None);
        assert_eq!(web.component(), Path::new("http://127.0.0.1:8000/mcp"));

        for (text, wanted) in [
            (
                "[[plugin]]\nid = \"a\"\nkind = \"mcp\"\n",
                "an MCP entry names its server",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"mcp\"\ncommand = [\"x\"]\nurl = \"http://h/\"\n",
                "an MCP entry has `command` (stdio) or `url` (HTTP), not both",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"mcp\"\nurl = \"ftp://h/\"\n",
                "key `url` must be an http:// or https:// URL",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"mcp\"\ncommand = []\n",
                "key `command` must be a non-empty list of strings",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"mcp\"\ncommand = [\"x\"]\ncomponent = \"a.wasm\"\n",
                "key `component` does not apply to `kind = \"mcp\"`",
            ),
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\nurl = \"http://h/\"\n",
                "key `url` is only for `kind = \"mcp\"` entries",
            ),
        ] {
            let (index, id, message) = entry_error(text);
            assert_eq!((index, id.as_str()), (1, "a"), "{text}");
            assert!(message.starts_with(wanted), "{text}: {message}");
        }
    }

    #[test]
    #[cfg(feature = "acp")]
    fn acp_entries_name_a_program_instead_of_a_component() {
        let config = parse(
            "[[plugin]]\nid = \"claude\"\nkind = \"acp\"\ncommand = [\"claude-code-acp\", \"--x\"]\n\
             config = { permissions = \"allow\" }\n\n\
             [[plugin]]\nid = \"local\"\nkind = \"acp\"\ncommand = [\"bin/agent\"]\n",
        )
        .unwrap();
        let [claude, local] = &config.plugins[..] else {
            panic!("{:?}", config.plugins)
        };
        assert_eq!(claude.kind, Some(seam_core::types::PluginKind::Provider));
        // A bare name stays bare (PATH is searched at run time); a path is the config's.
        assert_eq!(
            claude.source.command(),
            Some(&["claude-code-acp".to_string(), "--x".to_string()][..])
        );
        assert_eq!(claude.source.kind(), EntryKind::Backend("acp"));
        assert_eq!(claude.component(), Path::new("claude-code-acp"));
        assert_eq!(local.source.command().unwrap()[0], "/base/bin/agent");
        assert_eq!(local.component(), Path::new("/base/bin/agent"));

        for (text, wanted) in [
            (
                "[[plugin]]\nid = \"a\"\nkind = \"acp\"\n",
                "key `command` is missing",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = []\n",
                "key `command` must be a non-empty list of strings",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = [\"x\", 3]\n",
                "key `command` must be a non-empty list of strings",
            ),
            (
                "[[plugin]]\nid = \"a\"\nkind = \"acp\"\ncommand = [\"x\"]\ncomponent = \"a.wasm\"\n",
                "key `component` does not apply to `kind = \"acp\"`",
            ),
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\ncommand = [\"x\"]\n",
                "key `command` is only for `kind = \"acp\"` entries",
            ),
        ] {
            let (index, id, message) = entry_error(text);
            assert_eq!((index, id.as_str()), (1, "a"), "{text}");
            assert!(message.starts_with(wanted), "{text}: {message}");
        }
    }

    #[test]
    #[cfg(feature = "oci")]
    fn oci_entries_name_a_reference_and_what_verifies_it() {
        let hex = "a".repeat(64);
        let config = parse(&format!(
            "[oci]\nhttp = [\"127.0.0.1:5000\"]\nmax_layer_mb = 8\n\n\
             [[plugin]]\nid = \"a\"\ncomponent = \"oci://127.0.0.1:5000/seam/a:1.0\"\nverify = false\n\n\
             [[plugin]]\nid = \"b\"\ncomponent = \"oci://ghcr.io/org/b@sha256:{hex}\"\nverify = false\n"
        ))
        .unwrap();
        let [a, b] = &config.plugins[..] else {
            panic!("{:?}", config.plugins)
        };
        // The reference is kept as written, never joined to the config's folder.
        assert_eq!(a.component(), Path::new("oci://127.0.0.1:5000/seam/a:1.0"));
        let EntrySource::Oci(source) = &a.source else {
            panic!("{a:?}")
        };
        assert_eq!(source.reference.tag(), Some("1.0"));
        assert_eq!(source.verify, crate::oci::Verify::Unsigned);
        assert_eq!(source.settings.max_layer_bytes, 8 << 20);
        let EntrySource::Oci(b) = &b.source else {
            panic!("{b:?}")
        };
        assert_eq!(b.reference.digest().unwrap().hex(), hex);
        // Both lack a lock line until one is read.
        let names: Vec<String> = config.staleness().iter().map(|s| s.to_string()).collect();
        assert_eq!(names.len(), 2, "{names:?}");

        for (text, wanted) in [
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"oci://ghcr.io/org/a:1\"\n",
                "key `verify`: `oci://ghcr.io/org/a:1` comes from a registry, so it must be verified",
            ),
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"oci://ghcr.io/org/a:1\"\nverify = \"alice\"\n",
                "key `verify`: `alice` is not a key of [trust.keys] (the config has none)",
            ),
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\nverify = false\n",
                "key `verify` is only for components from a registry",
            ),
            (
                "[[plugin]]\nid = \"a\"\ncomponent = \"oci://org/a:1\"\nverify = false\n",
                "key `component`: `oci://org/a:1` does not start with a registry",
            ),
        ] {
            let (index, id, message) = entry_error(text);
            assert_eq!((index, id.as_str()), (1, "a"), "{text}");
            assert!(message.starts_with(wanted), "{text}: {message}");
        }
        let shown = parse("[oci]\nhttp = [\"registry.lan:5000\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            shown.contains("[oci]: key `http`: `registry.lan:5000` is not a loopback registry"),
            "{shown}"
        );
        assert!(parse("[oci]\nhttp = [\"registry.lan:5000\"]\ninsecure = true\n").is_ok());
        let shown = parse("[trust.keys]\nalice = \"missing.pub\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            shown.contains("[trust]: key `keys.alice`: cannot read key file `/base/missing.pub`"),
            "{shown}"
        );
    }

    #[test]
    fn the_rendered_error_names_file_entry_and_key() {
        let shown = parse("[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\nconfig = 3\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            shown,
            format!("config `{FILE}`: plugin entry 1 (id `a`): key `config` must be a table")
        );
        let shown = parse("[[plugin]\n").unwrap_err().to_string();
        assert!(shown.starts_with(&format!("config `{FILE}`: ")), "{shown}");
        assert!(shown.ends_with("(line 1)"), "{shown}");
        let shown = parse("[[plugin]]\nid = \"a\"\ncomponent = \"a.wasm\"\n\nx = = 1\n")
            .unwrap_err()
            .to_string();
        assert!(shown.ends_with("(line 5)"), "{shown}");
    }
}
