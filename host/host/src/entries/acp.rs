//! `kind = "acp"`: an agent program spoken to over the Agent Client Protocol, as a provider
//! (`seam-acp`).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use seam_core::types::PluginKind;

use super::backend::{absolute_program, string_list, watched_program, BackendEntry, Context, Entry, EntryBackend, Made, Summary};
use crate::sandbox::{EntryError, Grants, SandboxError};

/// The `acp` kind.
pub(super) struct Acp;

/// An ACP entry: the agent's argv, the program first (a bare name is looked up on PATH when a
/// run starts).
#[derive(Debug, PartialEq)]
struct AcpEntry(Vec<String>);

impl EntryBackend for Acp {
    fn name(&self) -> &'static str {
        "acp"
    }

    fn plugin_kind(&self) -> PluginKind {
        PluginKind::Provider
    }

    fn read(&self, table: &mut toml::Table, base: &Path) -> Result<BackendEntry, EntryError> {
        let mut argv = acp_command(table)?;
        absolute_program(base, &mut argv[0]);
        Ok(BackendEntry::new(AcpEntry(argv)))
    }

    fn what(&self, p: &Summary<'_>) -> String {
        match (p.name, p.command) {
            (Some(name), Some(argv)) => {
                format!("provider `{name}`, ACP agent `{}`{}", argv.join(" "), p.stale)
            }
            _ => String::new(),
        }
    }
}

impl Entry for AcpEntry {
    fn backend(&self) -> &'static dyn EntryBackend {
        &Acp
    }

    fn written(&self) -> PathBuf {
        PathBuf::from(&self.0[0])
    }

    fn watched_file(&self) -> Option<PathBuf> {
        watched_program(&self.0)
    }

    fn not_compiled(&self) -> &'static str {
        "an ACP agent program, nothing to compile"
    }

    fn command(&self) -> Option<&[String]> {
        Some(&self.0)
    }

    fn check_grants(&self, grants: &Grants) -> Result<(), SandboxError> {
        seam_acp::check_grants(grants)
    }

    fn prepare<'a>(&'a self, cx: Context<'a>) -> BoxFuture<'a, Result<Made, EntryError>> {
        let made = seam_acp::provider(
            cx.id,
            cx.config,
            &self.0,
            cx.sandbox,
            cx.cancel_grace,
            cx.live.clone(),
        )
        .map(|(descriptor, provider)| Made::Provider {
            descriptor,
            provider: Arc::new(provider),
            about: None,
        });
        Box::pin(std::future::ready(made))
    }

    fn same(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<Self>() == Some(self)
    }
}

/// Takes `kind = "acp"` and `command` out of an ACP entry's table: the agent's argv.
fn acp_command(table: &mut toml::Table) -> Result<Vec<String>, EntryError> {
    table.remove("kind");
    if table.contains_key("component") {
        return Err(EntryError::new(
            "component",
            "key `component` does not apply to `kind = \"acp\"`: the agent is the program in \
             `command`"
                .into(),
        ));
    }
    let Some(command) = table.remove("command") else {
        return Err(EntryError::new(
            "command",
            "key `command` is missing: an ACP entry names its agent program, as \
             `command = [\"program\", \"arg\"]`"
                .into(),
        ));
    };
    match string_list(&command) {
        Some(argv) if !argv[0].is_empty() => Ok(argv),
        _ => Err(EntryError::new(
            "command",
            "key `command` must be a non-empty list of strings, the program first".into(),
        )),
    }
}
