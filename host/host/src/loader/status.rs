//! What the loader says of its plugins: where each stands, why one failed, what a load did, and
//! how a changed entry is reloaded.

use std::path::PathBuf;
use std::sync::Arc;

use seam_core::types::PluginKind;
use serde::Serialize;
use thiserror::Error;

use crate::engine::EngineError;
use crate::kinds::PluginError;
use crate::sandbox::{EntryError, Granted, Limits, SandboxError};
use crate::versions::WitVersion;

/// Where a plugin is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "error")]
pub enum PluginState {
    /// Loading.
    Pending,
    /// Loaded and registered.
    Active,
    /// Loading failed; the message names the cause.
    Failed(String),
    /// Listed in the config with `disabled = true`.
    Disabled,
    /// Unloaded.
    Disposed,
}

/// Why a plugin failed to load.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The component could not be read, compiled or recognised.
    #[error("plugin `{id}`: {source}")]
    Engine {
        /// The plugin id.
        id: String,
        /// The engine's error.
        source: EngineError,
    },
    /// The component could not be linked, refused its config, trapped, or declared something
    /// malformed.
    #[error("plugin `{id}` ({}): {source}", component.display())]
    Guest {
        /// The plugin id.
        id: String,
        /// The component file.
        component: PathBuf,
        /// What went wrong.
        source: PluginError,
    },
    /// A registry refused the plugin: a provider could not be registered, or a tool added.
    #[error("plugin `{id}`: {source}")]
    Commit {
        /// The plugin id.
        id: String,
        /// The registry's error.
        source: crate::kinds::CommitError,
    },
    /// A grant or limit of the entry cannot be honoured on this host.
    #[error("plugin `{id}`: {source}")]
    Sandbox {
        /// The plugin id.
        id: String,
        /// The key and the problem.
        source: SandboxError,
    },
    /// The settings of an entry that is not a component (ACP, MCP) are wrong.
    #[error("plugin `{id}`: {source}")]
    Entry {
        /// The plugin id.
        id: String,
        /// What is wrong, naming the key.
        source: EntryError,
    },
    /// The tools of an entry that is not a component could not be mounted (an MCP server not
    /// reached); the message names the entry.
    #[error("{source}")]
    Mount {
        /// The plugin id.
        id: String,
        /// What went wrong.
        source: crate::entries::MountError,
    },
    /// A component from a registry could not be pulled, or was refused (a digest that is not
    /// the lock's or not what the registry's copy hashes to, a missing or wrong signature, a
    /// layer over the size limit).
    #[cfg(feature = "oci")]
    #[error("plugin `{id}`: {source}")]
    Oci {
        /// The plugin id.
        id: String,
        /// What went wrong, naming the reference.
        source: Box<crate::oci::OciError>,
    },
}

impl LoadError {
    /// The id of the entry that failed to load (every failure names its plugin).
    pub fn id(&self) -> &str {
        match self {
            Self::Engine { id, .. }
            | Self::Guest { id, .. }
            | Self::Commit { id, .. }
            | Self::Sandbox { id, .. }
            | Self::Entry { id, .. }
            | Self::Mount { id, .. } => id,
            #[cfg(feature = "oci")]
            Self::Oci { id, .. } => id,
        }
    }
}

/// A plugin as the loader sees it.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    /// The entry's id.
    pub id: String,
    /// What the entry names: the component file or reference, the agent program, the MCP
    /// server's program or URL.
    pub component: PathBuf,
    /// The kind of entry.
    pub entry: crate::config::EntryKind,
    /// Provider, tool or observer, once known.
    pub kind: Option<PluginKind>,
    /// The `seam:plugin` version its component was built against, once known (none for an ACP
    /// entry, which has no component).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<WitVersion>,
    /// Its state.
    pub state: PluginState,
    /// The provider name it registered, or the tool name it mounts under.
    pub name: Option<String>,
    /// For a tool: the provider it follows.
    pub follows: Option<String>,
    /// What the plugin is granted, once checked against the host.
    pub grants: Option<Granted>,
    /// The limits in force for the plugin.
    pub limits: Option<Limits>,
    /// For an ACP entry: the agent program and its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The most runs one instance of the provider serves at once (its entry's
    /// `config.share_instance`), when its runs share instances.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_runs: Option<usize>,
    /// What the entry's peer said of itself at load (an A2A agent's card: its name, whether it
    /// streams, its skills).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// Why the entry's newer definition failed to load, while this (last good) version keeps
    /// serving ([`Reload::Swap`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
    /// The host memory charged to the plugin, live (`host_memory_mb` bounds it).
    #[serde(skip)]
    pub host_memory: Option<std::sync::Arc<seam_core::budget::MemoryBudget>>,
    /// For a component from a registry: what was pulled and checked, once it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulled: Option<Pulled>,
    /// Whose native code serves the component: `winch` while a tiered host's Cranelift compile
    /// of it is under way (or when Winch is forced), else `cranelift`; none without a component.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler: Option<crate::engine::Compiler>,
}

/// What a component from a registry resolved to, as `seam check` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pulled {
    /// The manifest digest.
    pub digest: String,
    /// The component's size in bytes.
    pub size: u64,
    /// The key its signature verified against (name and fingerprint), if one was required.
    pub signer: Option<(String, String)>,
}

/// How a changed entry is reloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reload {
    /// Unload the old version (cancelling its runs), then load the new one; if the new one
    /// fails, the entry is `failed`.
    #[default]
    Restart,
    /// Prepare the new version while the old one serves, and swap only once it is ready: runs
    /// already going on a provider that keeps its name finish on the old version, and a new
    /// version that fails to load leaves the old one serving (listed in
    /// [`LoadReport::kept_last_good`], its [`PluginInfo::stale`] saying why).
    Swap,
}

/// What a load or reconfigure did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct LoadReport {
    /// Entries loaded for the first time.
    pub loaded: Vec<String>,
    /// Entries unloaded because they left the config.
    pub unloaded: Vec<String>,
    /// Entries whose definition changed, unloaded and loaded again.
    pub reloaded: Vec<String>,
    /// Entries that had failed and were tried again, unchanged.
    pub retried: Vec<String>,
    /// Changed entries whose new version failed to load, so the last good version keeps
    /// serving ([`Reload::Swap`] only; the failure is in `failed`).
    pub kept_last_good: Vec<String>,
    /// Entries left as they were.
    pub kept: Vec<String>,
    /// Failures, by entry id.
    #[serde(skip)]
    pub failed: Vec<Arc<LoadError>>,
}

impl LoadReport {
    /// Whether every entry loaded.
    pub fn is_ok(&self) -> bool {
        self.failed.is_empty()
    }

    /// One line per failure, for messages.
    pub fn failures(&self) -> String {
        self.failed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}
