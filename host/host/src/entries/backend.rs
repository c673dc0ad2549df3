//! What a kind of entry that is not a component implements ([`EntryBackend`] and [`Entry`]),
//! and what it makes ([`Made`]); with the helpers the kinds share to read their keys.

use std::any::Any;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use seam_agent::agent::AgentRegistry;
use seam_core::live::LiveCounts;
use seam_core::tool::ToolRegistry;
use seam_core::types::{PluginKind, ProviderDescriptor};

use crate::sandbox::{EntryError, Grants, Sandbox, SandboxError};

/// What a kind of entry that is not a component is: how its keys are read and how `seam check`
/// words it. One static value per kind, in [`KINDS`](super::KINDS).
pub trait EntryBackend: Send + Sync {
    /// What `kind = "..."` says (`acp`).
    fn name(&self) -> &'static str;

    /// The plugin kind its entries make (an ACP agent is a provider, an MCP server's tools are
    /// tools).
    fn plugin_kind(&self) -> PluginKind;

    /// Takes `kind` and the kind's own keys out of `table`, a path made absolute against
    /// `base`, the config's folder. The error names the key.
    fn read(&self, table: &mut toml::Table, base: &Path) -> Result<BackendEntry, EntryError>;

    /// What `seam check` says the entry's plugin registered or mounts, when it did not fail.
    fn what(&self, plugin: &Summary<'_>) -> String;

    /// Whether, of a component's limits, only the host-memory budget applies to it (`seam
    /// check` then shows only that).
    fn host_memory_only(&self) -> bool {
        false
    }
}

/// A loaded entry as `seam check` sees it, for [`EntryBackend::what`].
pub struct Summary<'a> {
    /// Whether it is active.
    pub active: bool,
    /// The name it registered (a provider's).
    pub name: Option<&'a str>,
    /// Its program and arguments, if it reports them ([`Entry::command`]).
    pub command: Option<&'a [String]>,
    /// What the entry names, as written ([`Entry::written`]).
    pub written: &'a Path,
    /// How many tools it has mounted.
    pub tools_mounted: usize,
    /// ` (last good version; see the error below)` when a newer version failed, or empty.
    pub stale: &'a str,
    /// What its peer said of itself at load ([`Made::Provider`]'s `about`).
    pub about: Option<&'a str>,
}

/// One entry of a backend's kind, as its keys were read.
pub trait Entry: std::fmt::Debug + Send + Sync + Any {
    /// Its kind.
    fn backend(&self) -> &'static dyn EntryBackend;

    /// What the entry names, as written (made absolute where it is a path): a program or URL.
    fn written(&self) -> PathBuf;

    /// The local file whose change means the entry is to be reloaded (`seam dev` watches it).
    fn watched_file(&self) -> Option<PathBuf>;

    /// Why `seam compile` has nothing to compile for it: what it is.
    fn not_compiled(&self) -> &'static str;

    /// The program and its arguments, when `seam check` reports them.
    fn command(&self) -> Option<&[String]> {
        None
    }

    /// Refuses a grant that cannot apply to it (checked before the grants are resolved).
    fn check_grants(&self, grants: &Grants) -> Result<(), SandboxError>;

    /// Makes its plugin, in phase one of a load (nothing is registered yet); it may reach its
    /// peer (an A2A agent's card is fetched and checked here).
    fn prepare<'a>(&'a self, cx: Context<'a>) -> BoxFuture<'a, Result<Made, EntryError>>;

    /// Whether `other` is the same entry (a changed one is reloaded).
    fn same(&self, other: &dyn Any) -> bool;
}

/// An entry of a backend's kind: what [`crate::config::EntrySource`] holds for it.
#[derive(Debug, Clone)]
pub struct BackendEntry(Arc<dyn Entry>);

impl BackendEntry {
    /// Wraps a backend's entry.
    pub fn new(entry: impl Entry) -> Self {
        Self(Arc::new(entry))
    }
}

impl std::ops::Deref for BackendEntry {
    type Target = dyn Entry;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl PartialEq for BackendEntry {
    fn eq(&self, other: &Self) -> bool {
        let other: &dyn Any = &*other.0;
        self.0.same(other)
    }
}

/// What an entry's plugin is made with.
pub struct Context<'a> {
    /// The entry's id.
    pub id: &'a str,
    /// Its `config` table.
    pub config: &'a serde_json::Value,
    /// Its sandbox, grants resolved.
    pub sandbox: &'a Sandbox,
    /// How long a cancelled run is given to finish.
    pub cancel_grace: Duration,
    /// The host's live counts.
    pub live: Arc<LiveCounts>,
    /// The agent registry, for runs the plugin starts.
    pub agents: Weak<AgentRegistry>,
    /// Whether the host loads to replay a recording: a peer whose answers the recording keeps
    /// is not reached.
    pub replaying: bool,
}

/// An entry's plugin, ready to commit.
pub enum Made {
    /// A provider and its frozen descriptor, registered as a component's is.
    Provider {
        /// The descriptor.
        descriptor: ProviderDescriptor,
        /// The provider.
        provider: Arc<dyn seam_core::subagent::Provider>,
        /// What its peer said of itself at load (an A2A agent's card: name, skills), for
        /// `seam check`.
        about: Option<String>,
    },
    /// Tools, mounted when the entry is committed.
    Tools(Box<dyn MountTools>),
}

/// Why tools could not be mounted; the message names the entry.
pub type MountError = Box<dyn Error + Send + Sync>;

/// Tools an entry mounts when committed; the registry lists them (and they may change).
pub trait MountTools: Send + Sync {
    /// Mounts the tools on `tools`.
    fn mount<'a>(&'a self, tools: &'a Arc<ToolRegistry>) -> BoxFuture<'a, Result<(), MountError>>;
}

/// A program named with a path is found from the config's folder, as components are; a bare
/// name is looked up on PATH when it starts.
pub fn absolute_program(base: &Path, program: &mut String) {
    if program.contains('/') && Path::new(program.as_str()).is_relative() {
        *program = base.join(&*program).to_string_lossy().into_owned();
    }
}

/// The program of `argv` when it is named by an absolute path: the file `seam dev` watches.
pub fn watched_program(argv: &[String]) -> Option<PathBuf> {
    argv.first().map(PathBuf::from).filter(|p| p.is_absolute())
}

/// A non-empty TOML array of strings.
pub fn string_list(value: &toml::Value) -> Option<Vec<String>> {
    let argv: Vec<String> = value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    (!argv.is_empty()).then_some(argv)
}
